/* view.c: what a path shows through the mount (view.h). */
#include <errno.h>

#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/view.h"
#include "fuse/wbq.h"

int mbfs_view_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_wbq_gone(fs, path))
		return -ENOENT;   /* its removal is on its way */
	int rc = mbfs_cache_getattr(fs, path, st);
	if (rc == 0)
		mbfs_batch_apply(fs, path, st);
	return rc;
}

int mbfs_view_refresh(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_wbq_gone(fs, path))
		return -ENOENT;
	return mbfs_cache_refresh(fs, path, st);
}
