/* view.c: what a path shows through the mount (view.h). */
#include <errno.h>

#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/view.h"
#include "fuse/gone.h"
#include "fuse/mbfs.h"
#include "fuse/newdir.h"

bool mbfs_view_gone(struct mbfs *fs, const char *path)
{
	struct stat st;
	/* removed here (it or a directory above), unless made again since */
	return mbfs_gone_below(fs->gone, path) &&
	       mbfs_newdir_stat(fs->newdirs, path, &st) != 1;
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
