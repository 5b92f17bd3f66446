/* tarread.c: the members of a tar archive in a local file (tarread.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/transport/tarread.h"
#include "fuse/durable/fdio.h"

#define BLOCK 512u
/* the longest GNU long name taken: a guest path, and some slack */
#define LONG_NAME_MAX 8192u

/* A numeric field: octal digits (space or NUL padded), or GNU's base-256
 * (high bit of the first byte set). -1 when malformed or negative. */
static int num(const unsigned char *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (f[0] & 0x80) {
		if (f[0] & 0x40)        /* negative */
			return -1;
		v = f[0] & 0x3f;
		for (size_t i = 1; i < n; i++) {
			if (v >> 56)
				return -1;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	size_t i = 0;
	while (i < n && f[i] == ' ')
		i++;
	bool any = false;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
		any = true;
	}
	if (!any || (i < n && f[i] != ' ' && f[i] != '\0'))
		return -1;
	*out = v;
	return 0;
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	if (num(h + 148, 8, &want))
		return false;
	uint64_t sum = 0;
	for (size_t i = 0; i < BLOCK; i++)
		sum += i >= 148 && i < 156 ? ' ' : h[i];
	return sum == want;
}

static bool all_zero(const unsigned char *h)
{
	for (size_t i = 0; i < BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

int mbfs_tar_walk(int fd, uint64_t len,
		  int (*fn)(void *ud, const struct mbfs_tar_member *m),
		  void *ud, struct mb_err *err)
{
	unsigned char h[BLOCK];
	char *longname = NULL;
	/* ustar: name[100], or prefix[155] "/" name[100] */
	char name[100 + 1 + 155 + 1];
	bool skip_next = false;
	int rc = 0;
	uint64_t off = 0;
	mb_err_clear(err);
	while (!rc && off + BLOCK <= len) {
		if ((rc = mbfs_pread_all(fd, h, BLOCK, off))) {
			mb_err_set(err, -rc, "cannot read the archive at %llu",
				   (unsigned long long)off);
			break;
		}
		if (all_zero(h))
			break;
		uint64_t size, mtime;
		const char *bad = !checksum_ok(h) ? "a bad checksum"
			: num(h + 124, 12, &size) ? "a bad size field"
			: num(h + 136, 12, &mtime) ? "a bad mtime field"
			: size > len - off - BLOCK ? "a size past the end" : NULL;
		uint64_t data = off + BLOCK;
		uint64_t next = bad ? 0 : data + (size + BLOCK - 1) / BLOCK * BLOCK;
		if (!bad && next > len)
			bad = "a size past the end";
		if (bad) {
			rc = mb_err_set(err, EIO, "the header at %llu of the archive "
					"has %s", (unsigned long long)off, bad);
			break;
		}
		char type = (char)h[156];
		if (type == 'L') {
			/* GNU: the data is the next member's name */
			free(longname);
			longname = NULL;
			if (size == 0 || size > LONG_NAME_MAX) {
				rc = mb_err_set(err, EIO, "the long name at %llu of "
						"the archive has %llu bytes",
						(unsigned long long)off,
						(unsigned long long)size);
				break;
			}
			if (!(longname = malloc(size + 1))) {
				rc = mb_err_set(err, ENOMEM, "out of memory");
				break;
			}
			if ((rc = mbfs_pread_all(fd, longname, size, data))) {
				mb_err_set(err, -rc, "cannot read the archive at %llu",
					   (unsigned long long)data);
				break;
			}
			longname[size] = '\0';
		} else if (type == 'x' || type == 'g' || type == 'K') {
			/* a pax header may rename the next member: skip it */
			if (type == 'x')
				skip_next = true;
		} else {
			if (longname) {
				name[0] = '\0';
			} else if (memcmp(h + 257, "ustar\0", 6) == 0 && h[345]) {
				snprintf(name, sizeof(name), "%.155s/%.100s",
					 (const char *)h + 345, (const char *)h);
			} else {
				snprintf(name, sizeof(name), "%.100s",
					 (const char *)h);
			}
			struct mbfs_tar_member m = {
				.name = longname ? longname : name,
				.type = type,
				.size = size,
				.mtime = (time_t)mtime,
				.off = data,
			};
			if (!skip_next && (rc = fn(ud, &m)))
				mb_err_set(err, rc < 0 ? -rc : EIO, "member '%.200s' "
					   "of the archive could not be kept",
					   m.name);
			skip_next = false;
			free(longname);
			longname = NULL;
		}
		off = next;
	}
	free(longname);
	return rc;
}
