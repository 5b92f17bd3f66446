/* packparse.c: pack.sh's listing records into listings (packparse.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fuse/bulk/packparse.h"
#include "fuse/transport/xfer.h"

#define FIELDS 9

/* One entry of a listing, with the (normalised) path of its directory. */
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

/* find's %y; 0 for a letter it never prints. */
static int ftype(const char *y, enum mb_ftype *t)
{
	if (!y[0] || y[1])
		return -1;
	switch (y[0]) {
	case 'f': *t = MB_FT_FILE; return 0;
	case 'd': *t = MB_FT_DIR; return 0;
	case 'l': *t = MB_FT_SYMLINK; return 0;
	case 'p': *t = MB_FT_FIFO; return 0;
	case 's': *t = MB_FT_SOCKET; return 0;
	case 'c': *t = MB_FT_CHAR; return 0;
	case 'b': *t = MB_FT_BLOCK; return 0;
	case 'D': *t = MB_FT_OTHER; return 0;
	default: return -1;
	}
}

/* Digits only (no sign, space or empty), in base, at most max. */
static int number(const char *s, unsigned base, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (*s < '0' || d >= base || d > max || v > (max - d) / base)
			return -1;
		v = v * base + d;
	}
	*out = v;
	return 0;
}

/* %T@: [-]SECONDS[.FRACTION], as whole seconds (the floor, as stat %Y). */
static int seconds(const char *s, int64_t *out, long *nsec)
{
	bool neg = *s == '-';
	const char *dot = strchr(s + neg, '.');
	char whole[24];
	size_t wl = dot ? (size_t)(dot - s - neg) : strlen(s + neg);
	uint64_t v;
	long ns = 0;
	if (wl >= sizeof(whole))
		return -1;
	memcpy(whole, s + neg, wl);
	whole[wl] = '\0';
	if (number(whole, 10, INT64_MAX - 1, &v))
		return -1;
	if (dot && (!dot[1] || (ns = mb_frac_nsec(dot + 1, strlen(dot + 1))) < 0))
		return -1;
	/* find's %T@ is the second, then the nanoseconds after it: 0.25 s
	 * before the epoch is -1.75 */
	*out = neg ? -(int64_t)v : (int64_t)v;
	*nsec = ns;
	return 0;
}

static bool plain_name(const char *c, size_t n)
{
	return n > 0 && n <= NAME_MAX && !memchr(c, '/', n) &&
	       !(n == 1 && c[0] == '.') &&
	       !(n == 2 && c[0] == '.' && c[1] == '.');
}

/* The directory field ("." or "./a/b") as "" or "a/b", malloc'd; NULL
 * (errno EINVAL) when it is no plain path below the root. */
static char *dir_rel(const char *h)
{
	if (strcmp(h, ".") == 0)
		return strdup("");
	if (strncmp(h, "./", 2) != 0) {
		errno = EINVAL;
		return NULL;
	}
	h += 2;
	for (const char *c = h;;) {
		size_t n = strcspn(c, "/");
		if (!plain_name(c, n) ||
		    strncmp(c, MBFS_STAGING_PREFIX,
			    sizeof(MBFS_STAGING_PREFIX) - 1) == 0) {
			errno = EINVAL;
			return NULL;
		}
		c += n;
		if (!*c)
			break;
		c++;
	}
	return strdup(h);
}

/* One record of FIELDS NUL-ended fields at *p (< end) into it, which is
 * zeroed first whatever happens (the caller releases it). */
static int parse_item(const char **p, const char *end, struct item *it,
		      size_t k, struct mb_err *err)
{
	static const char *const what[FIELDS] = {
		"type", "mode", "uid", "gid", "size", "mtime", "directory",
		"name", "target"
	};
	const char *f[FIELDS];
	uint64_t mode, uid, gid, size;
	int64_t mtime;
	long nsec = 0;
	memset(it, 0, sizeof(*it));
	for (int i = 0; i < FIELDS; i++) {
		size_t room = (size_t)(end - *p);
		const char *z = memchr(*p, '\0', room < MBFS_PACK_FIELD_MAX + 1
				       ? room : MBFS_PACK_FIELD_MAX + 1);
		if (!z)
			return mb_err_set(err, EIO, "listing record %zu: its %s "
					  "field is %s", k, what[i],
					  room > MBFS_PACK_FIELD_MAX
					  ? "too long" : "cut short");
		f[i] = *p;
		*p = z + 1;
	}
	int bad = ftype(f[0], &it->e.type) ? 0
		: number(f[1], 8, 07777, &mode) ? 1
		: number(f[2], 10, UINT32_MAX, &uid) ? 2
		: number(f[3], 10, UINT32_MAX, &gid) ? 3
		: number(f[4], 10, INT64_MAX, &size) ? 4
		: seconds(f[5], &mtime, &nsec) ? 5
		: !plain_name(f[7], strlen(f[7])) ? 7
		: -1;
	if (bad < 0 && !(it->dir = dir_rel(f[6])))
		bad = errno == ENOMEM ? -2 : 6;
	if (bad == -2)
		return mb_err_set(err, ENOMEM, "out of memory");
	if (bad >= 0)
		return mb_err_set(err, EIO, "listing record %zu: bad %s field",
				  k, what[bad]);
	it->e.mode = (unsigned)mode;
	it->e.uid = (unsigned)uid;
	it->e.gid = (unsigned)gid;
	it->e.size = size;
	it->e.mtime = (time_t)mtime;
	it->e.mtime_nsec = nsec;
	it->e.mtime_exact = true;
	const char *name = f[7], *target = f[8];
	it->bad = !mb_utf8_valid(name, strlen(name)) ||
		  !mb_utf8_valid(target, strlen(target));
	it->e.name = strdup(name);
	if (it->e.type == MB_FT_SYMLINK)
		it->e.link_target = strdup(target);
	if (!it->e.name || (it->e.type == MB_FT_SYMLINK && !it->e.link_target))
		return mb_err_set(err, ENOMEM, "out of memory");
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

/* Hand dir's listing, the items v[0, n) (moved out of v), to fn. */
static int hand(const char *dir, struct item *v, size_t n,
		mbfs_pack_dir_fn fn, void *ud)
{
	struct mb_entry_list list = { calloc(n ? n : 1, sizeof(struct mb_entry)),
				      n };
	if (!list.v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		list.v[i] = v[i].e;
		memset(&v[i].e, 0, sizeof(v[i].e));
	}
	return fn(ud, dir, &list);
}

/* Every record of text[0, len) into *vp, *np. */
static int parse_all(const char *text, size_t len, struct item **vp,
		     size_t *np, size_t *ndirs, struct mb_err *err)
{
	const char *p = text, *end = text + len;
	size_t n = 0, cap = 64;
	struct item *v = malloc(cap * sizeof(*v));
	int rc = v ? 0 : mb_err_set(err, ENOMEM, "out of memory");
	*ndirs = 0;
	while (!rc && p < end) {
		if (n == cap) {
			struct item *nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv) {
				rc = mb_err_set(err, ENOMEM, "out of memory");
				break;
			}
			v = nv;
			cap *= 2;
		}
		rc = parse_item(&p, end, &v[n], n, err);
		*ndirs += !rc && v[n].e.type == MB_FT_DIR;
		n++;    /* released below either way: parse_item zeroed it */
	}
	if (rc && v) {
		free_items(v, n);
		v = NULL;
		n = 0;
	}
	*vp = v;
	*np = n;
	return rc;
}

int mbfs_pack_parse(const char *text, size_t len, mbfs_pack_dir_fn fn,
		    void *ud, struct mb_err *err)
{
	struct item *v;
	size_t n, ndirs, nd = 0;
	mb_err_clear(err);
	int rc = parse_all(text, len, &v, &n, &ndirs, err);
	if (rc)
		return rc;
	/* the directories walked: the root and every directory entry */
	char **dirs = calloc(ndirs + 1, sizeof(*dirs));
	if (!dirs || !(dirs[nd++] = strdup("")))
		rc = mb_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < n; i++) {
		if (v[i].e.type != MB_FT_DIR || v[i].bad)
			continue;
		size_t dl = strlen(v[i].dir), nl = strlen(v[i].e.name);
		char *d = malloc(dl + 1 + nl + 1);
		if (!d) {
			rc = mb_err_set(err, ENOMEM, "out of memory");
			break;
		}
		memcpy(d, v[i].dir, dl);
		d[dl] = '/';
		memcpy(d + (dl ? dl + 1 : 0), v[i].e.name, nl + 1);
		dirs[nd++] = d;
	}
	if (!rc) {
		qsort(v, n, sizeof(*v), by_dir);
		qsort(dirs, nd, sizeof(*dirs), by_str);
		/* merge: each directory with its run of items (none: empty) */
		size_t i = 0;
		for (size_t k = 0; !rc && k < nd; k++) {
			while (i < n && strcmp(v[i].dir, dirs[k]) < 0)
				i++;
			/* a name the list route cannot return (not UTF-8)
			 * goes too: the cache's name rule drops it, the rest
			 * of its directory shows */
			size_t j = i;
			while (j < n && strcmp(v[j].dir, dirs[k]) == 0)
				j++;
			if (k == 0 || strcmp(dirs[k], dirs[k - 1]))
				rc = hand(dirs[k], v + i, j - i, fn, ud);
			i = j;
		}
	}
	for (size_t k = 0; dirs && k < nd; k++)
		free(dirs[k]);
	free(dirs);
	free_items(v, n);
	return rc;
}
