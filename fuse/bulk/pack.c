/* pack.c: member names and listings of pack.sh's archives (pack.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/api.h"
#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/mbfs.h"
#include "fuse/transport/name.h"
#include "fuse/bulk/pack.h"
#include "fuse/bulk/packparse.h"

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
		/* mbfs's own names (name.h): the control file only at the
		 * mount's root */
		bool top = c == rel && strcmp(base, "/") == 0;
		if (mbfs_name_reserved(comp) &&
		    (top || strcmp(comp, MB_CONTROL_NAME) != 0))
			return false;
		c += n;
		if (*c == '/' && !*++c)
			return false;
	}
	int w = snprintf(out, MB_PATH_MAX, "%s/%s",
			 strcmp(base, "/") == 0 ? "" : base, rel);
	return w > 0 && w < MB_PATH_MAX;
}

/* Where a listing goes: the cache, under the mount path of its directory. */
struct put {
	struct mbfs *fs;
	const char *base;
	uint64_t ctr;
};

static int put_one(void *ud, const char *rel, struct mb_entry_list *list)
{
	struct put *u = ud;
	char path[MB_PATH_MAX];
	if (rel[0] && !mbfs_pack_path(u->base, rel, path)) {
		mb_entry_list_release(list);
		return 0;       /* too long for a mount path: not kept */
	}
	mbfs_cache_put_listing(u->fs, rel[0] ? path : u->base, list, u->ctr,
			       false);
	return 0;
}

int mbfs_pack_listings(struct mbfs *fs, const char *base, const char *text,
		       size_t len, uint64_t ctr, struct mb_err *err)
{
	struct put u = { fs, base, ctr };
	return mbfs_pack_parse(text, len, put_one, &u, err);
}
