/* view.c: what a path shows through the mount (view.h). */
#include <errno.h>
#include <string.h>

#include "fuse/outbox/batch.h"
#include "fuse/cache/cache.h"
#include "fuse/view/view.h"
#include "fuse/outbox/gone.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/newdir.h"

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

int mbfs_view_lookup(struct mbfs *fs, const char *path, struct stat *st)
{
	int rc = mbfs_newdir_stat(fs->newdirs, path, st);
	if (rc)   /* not on the guest yet */
		return rc > 0 ? 0 : rc;
	return mbfs_cache_getattr(fs, path, st);
}

int mbfs_view_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_view_gone(fs, path))
		return -ENOENT;   /* its removal is on its way */
	int rc = mbfs_view_lookup(fs, path, st);
	if (rc == 0)
		mbfs_batch_apply(fs, path, st);
	return rc;
}

int mbfs_view_refresh(struct mbfs *fs, const char *path, struct stat *st)
{
	if (mbfs_view_gone(fs, path))
		return -ENOENT;
	int rc = mbfs_newdir_stat(fs->newdirs, path, st);
	if (rc)
		return rc > 0 ? 0 : rc;
	return mbfs_cache_refresh(fs, path, st);
}

bool mbfs_view_made_here(struct mbfs *fs, const char *path)
{
	struct stat st;
	return mbfs_newdir_stat(fs->newdirs, path, &st) != 0;
}

int mbfs_view_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		      void *ud)
{
	struct stat st;
	int rc = mbfs_newdir_stat(fs->newdirs, path, &st);
	if (rc)   /* not on the guest yet: what is in it is listed here */
		return rc > 0 ? 0 : rc;
	return mbfs_cache_readdir(fs, path, fn, ud);
}
