/* test_tarread.c: the tar walk of bulk reads (fuse/tarread.c). */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuse/transport/tarread.h"
#include "tests/unit/unit.h"

struct seen {
	int n;
	char names[8][256];
	uint64_t sizes[8];
};

static int collect(void *ud, const struct mbfs_tar_member *m)
{
	struct seen *s = ud;
	if (s->n < 8) {
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", m->name);
		s->sizes[s->n] = m->size;
	}
	s->n++;
	return 0;
}

/* Walk p[0, len) as a file. */
static int walk(const void *p, size_t len, struct seen *s)
{
	int fd = memfd_create("tar", 0);
	struct mb_err err;
	if (fd < 0 || write(fd, p, len) != (ssize_t)len)
		exit(2);
	memset(s, 0, sizeof(*s));
	int rc = mbfs_tar_walk(fd, len, collect, s, &err);
	if (rc == -EIO)
		CHECK(err.msg[0]);
	close(fd);
	return rc;
}

/* The header checksum of h, written into it. */
static void sum(unsigned char *h)
{
	unsigned v = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		v += h[i];
	snprintf((char *)h + 148, 8, "%06o", v);
}

static void real(void)
{
	size_t len;
	char *a = unit_seed("tar/archive.tar", &len);
	struct seen s;
	CHECK_INT(walk(a, len, &s), 0);
	CHECK_INT(s.n, 4);
	CHECK_STR(s.names[0], "./x.txt");
	CHECK_INT(s.sizes[0], 6);
	CHECK_STR(s.names[2], "./a/y");
	CHECK(strlen(s.names[3]) > 100);      /* the GNU long name */
	/* cut anywhere: the members before, then 0 or -EIO */
	for (size_t k = 0; k < len; k++) {
		int rc = walk(a, k, &s);
		CHECK(rc == 0 || rc == -EIO);
		if (k % 512)
			CHECK(s.n <= 4);
	}
	/* any byte of a header changed: refused (its checksum; in the
	 * checksum field a space and a NUL end the number alike) */
	for (size_t k = 0; k < 512; k++) {
		if (k >= 148 && k < 156)
			continue;
		a[k] ^= 0x20;
		CHECK_INT(walk(a, len, &s), -EIO);
		a[k] ^= 0x20;
	}
	free(a);
}

static void crafted(void)
{
	unsigned char t[4096];
	struct seen s;
	memset(t, 0, sizeof(t));
	strcpy((char *)t, "f");
	memcpy(t + 100, "0000644", 7);
	memcpy(t + 124, "00000000001", 11);
	memcpy(t + 136, "00000000001", 11);
	t[156] = '0';
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), 0);
	CHECK_INT(s.n, 1);
	/* a size past the end */
	memcpy(t + 124, "77777777777", 11);
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	CHECK_INT(s.n, 0);
	/* base-256: huge, negative */
	memset(t + 124, 0xff, 12);
	t[124] = 0x80;
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	t[124] = 0xc0;
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	/* a size field that is not octal */
	memcpy(t + 124, "0000000009\0\0", 12);
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	/* a GNU long name too long, or empty */
	memcpy(t + 124, "00000020001", 12);
	t[156] = 'L';
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	memcpy(t + 124, "00000000000", 12);
	sum(t);
	CHECK_INT(walk(t, sizeof(t), &s), -EIO);
	/* a long name with no member after it: the end, nothing passed */
	memcpy(t + 124, "00000000004", 12);
	sum(t);
	memcpy(t + 512, "name", 4);
	CHECK_INT(walk(t, sizeof(t), &s), 0);
	CHECK_INT(s.n, 0);
	/* nothing at all, or less than a block */
	CHECK_INT(walk(t, 0, &s), 0);
	CHECK_INT(walk(t, 100, &s), 0);
}

int main(void)
{
	real();
	crafted();
	return unit_end("tarread");
}
