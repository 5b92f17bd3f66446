/* view.c: what a path shows through the mount (view.h). */
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/view.h"

int mbfs_view_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	int rc = mbfs_cache_getattr(fs, path, st);
	if (rc == 0)
		mbfs_batch_apply(fs, path, st);
	return rc;
}
