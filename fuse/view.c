/* view.c: what a path shows through the mount (view.h). */
#include <errno.h>
#include <string.h>

#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/view.h"
#include "fuse/gone.h"
#include "fuse/mbfs.h"
#include "fuse/newdir.h"

bool mbfs_view_gone(struct mbfs *fs, const char *path)
{
	if (!mbfs_gone_below(fs->gone, path))
		return false;
	/* the nearest word decides, from path up: a directory made here
	 * again (newer than any removal of its name still queued) holds
	 * what is in it; a removal of it or above hides path */
	char p[MB_PATH_MAX];
	struct stat st;
	size_t len = strlen(path);
	if (len >= sizeof(p))
		return false;
	memcpy(p, path, len + 1);
	while (len > 1) {
		p[len] = '\0';
		if (mbfs_newdir_stat(fs->newdirs, p, &st) == 1)
			return false;
		if (mbfs_gone_at(fs->gone, p, len))
			return true;
		while (len > 0 && p[--len] != '/')
			;
	}
	return false;
}

int mbfs_view_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_view_gone(fs, path))
		return -ENOENT;   /* its removal is on its way */
	int rc = mbfs_cache_getattr(fs, path, st);
	if (rc == 0)
		mbfs_batch_apply(fs, path, st);
	return rc;
}

int mbfs_view_refresh(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_view_gone(fs, path))
		return -ENOENT;
	return mbfs_cache_refresh(fs, path, st);
}
