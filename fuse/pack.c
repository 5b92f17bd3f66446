/* pack.c: member names and listings of pack.sh's archives (pack.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "common/util.h"
#include "fuse/cache.h"
#include "fuse/mbfs.h"
#include "fuse/pack.h"
#include "fuse/xfer.h"

#define FIELDS 9

bool mbfs_pack_path(const char *base, const char *rel, char *out)
{
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	if (!rel[0] || rel[0] == '/')
		return false;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		char comp[256];
		if (n >= sizeof(comp))
			return false;
		memcpy(comp, c, n);
		comp[n] = '\0';
		if (mbfs_xfer_is_staging(comp))
			return false;
		c += n;
		if (*c == '/' && !*++c)
			return false;
	}
	int w = snprintf(out, MB_PATH_MAX, "%s/%s",
			 strcmp(base, "/") == 0 ? "" : base, rel);
	return w > 0 && w < MB_PATH_MAX;
}

/* One entry of a listing, with the mount path of its directory. */
struct item {
	char *dir;
	struct mb_entry e;
	bool bad;               /* the list route would refuse its page */
};

static int by_dir(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->dir,
		      ((const struct item *)b)->dir);
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum mb_ftype ftype(const char *y)
{
	switch (y[0]) {
	case 'f': return MB_FT_FILE;
	case 'd': return MB_FT_DIR;
	case 'l': return MB_FT_SYMLINK;
	case 'p': return MB_FT_FIFO;
	case 's': return MB_FT_SOCKET;
	case 'c': return MB_FT_CHAR;
	case 'b': return MB_FT_BLOCK;
	default: return MB_FT_OTHER;
	}
}

/* The directory field ("." or "./a/b") as a mount path, malloc'd. */
static char *dir_path(const char *base, const char *h)
{
	char out[MB_PATH_MAX];
	if (strcmp(h, ".") == 0)
		return strdup(base);
	return mbfs_pack_path(base, h, out) ? strdup(out) : NULL;
}

/* Parse one record of FIELDS NUL-ended fields at *p (< end) into it. */
static int parse_item(const char *base, const char **p, const char *end,
		      struct item *it)
{
	const char *f[FIELDS];
	for (int i = 0; i < FIELDS; i++) {
		const char *z = memchr(*p, '\0', (size_t)(end - *p));
		if (!z)
			return -EIO;
		f[i] = *p;
		*p = z + 1;
	}
	char *e1, *e2, *e3, *e4, *e5;
	unsigned long mode = strtoul(f[1], &e1, 8);
	unsigned long uid = strtoul(f[2], &e2, 10);
	unsigned long gid = strtoul(f[3], &e3, 10);
	unsigned long long size = strtoull(f[4], &e4, 10);
	long long mtime = strtoll(f[5], &e5, 10);
	if (*e1 || *e2 || *e3 || *e4 || (*e5 && *e5 != '.') ||
	    !f[0][0] || f[0][1])
		return -EIO;
	if (f[5][0] == '-' && *e5 == '.' && strspn(e5 + 1, "0") != strlen(e5 + 1))
		mtime--;        /* whole seconds, as stat %Y: the floor */
	memset(it, 0, sizeof(*it));
	it->e.type = ftype(f[0]);
	it->e.mode = (unsigned)mode & 07777;
	it->e.uid = (unsigned)uid;
	it->e.gid = (unsigned)gid;
	it->e.size = size;
	it->e.mtime = (time_t)mtime;
	const char *name = f[7], *target = f[8];
	it->bad = !mb_utf8_valid(name, strlen(name)) ||
		  !mb_utf8_valid(target, strlen(target));
	if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return -EIO;
	it->dir = dir_path(base, f[6]);
	it->e.name = strdup(name);
	if (it->e.type == MB_FT_SYMLINK)
		it->e.link_target = strdup(target);
	if (!it->dir || !it->e.name ||
	    (it->e.type == MB_FT_SYMLINK && !it->e.link_target))
		return -EIO;
	return 0;
}

static void free_items(struct item *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].dir);
		mb_entry_release(&v[i].e);
	}
	free(v);
}

/* Store the listing of dir: the items v[0, n) (moved out of v). */
static void store(struct mbfs *fs, const char *dir, struct item *v, size_t n,
		  uint64_t ctr)
{
	struct mb_entry_list list = { calloc(n ? n : 1, sizeof(struct mb_entry)),
				      n };
	if (!list.v)
		return;
	for (size_t i = 0; i < n; i++) {
		list.v[i] = v[i].e;
		memset(&v[i].e, 0, sizeof(v[i].e));
	}
	mbfs_cache_put_listing(fs, dir, &list, ctr);
}

int mbfs_pack_listings(struct mbfs *fs, const char *base, const char *text,
		       size_t len, uint64_t ctr)
{
	const char *p = text, *end = text + len;
	size_t n = 0, cap = 64, ndirs = 0;
	struct item *v = malloc(cap * sizeof(*v));
	int rc = v ? 0 : -ENOMEM;
	while (!rc && p < end) {
		if (n == cap) {
			struct item *nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap *= 2;
		}
		rc = parse_item(base, &p, end, &v[n]);
		if (rc) {
			free(v[n].dir);
			mb_entry_release(&v[n].e);
		} else {
			ndirs += v[n].e.type == MB_FT_DIR;
			n++;
		}
	}
	/* the directories walked: base and every directory entry */
	char **dirs = rc ? NULL : calloc(ndirs + 1, sizeof(*dirs));
	size_t nd = 0;
	if (!rc && !dirs)
		rc = -ENOMEM;
	if (!rc && !(dirs[nd++] = strdup(base)))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		char path[MB_PATH_MAX];
		if (v[i].e.type != MB_FT_DIR || v[i].bad)
			continue;
		int w = snprintf(path, sizeof(path), "%s/%s",
				 strcmp(v[i].dir, "/") == 0 ? "" : v[i].dir,
				 v[i].e.name);
		if (w > 0 && w < (int)sizeof(path) && !(dirs[nd++] = strdup(path)))
			rc = -ENOMEM;
	}
	if (!rc) {
		qsort(v, n, sizeof(*v), by_dir);
		qsort(dirs, nd, sizeof(*dirs), by_str);
		/* merge: each directory with its run of items (none: empty) */
		size_t i = 0;
		for (size_t k = 0; k < nd; k++) {
			while (i < n && strcmp(v[i].dir, dirs[k]) < 0)
				i++;
			size_t j = i;
			bool bad = false;
			while (j < n && strcmp(v[j].dir, dirs[k]) == 0)
				bad |= v[j++].bad;
			if (!bad && (k == 0 || strcmp(dirs[k], dirs[k - 1])))
				store(fs, dirs[k], v + i, j - i, ctr);
			i = j;
		}
	}
	for (size_t k = 0; dirs && k < nd; k++)
		free(dirs[k]);
	free(dirs);
	free_items(v, n);
	return rc;
}
