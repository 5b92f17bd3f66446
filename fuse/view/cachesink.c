/* cachesink.c: the outbox's results told to the cache, and what a path shows
 * asked of the view (fuse/outbox/sink.h). */
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/cache/cache.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/sink.h"
#include "fuse/view/cachesink.h"
#include "fuse/view/view.h"

static void cache_landed(struct mbfs *fs, const char *path, const struct stat *st,
		   bool dir)
{
	if (dir)
		mbfs_cache_put_dir(fs->cache, path, st);
	else
		mbfs_cache_put(fs->cache, path, st);
}

static void cache_unsure(struct mbfs *fs, const char *path, bool tree)
{
	if (tree)
		mbfs_cache_invalidate_tree(fs->cache, path);
	else
		mbfs_cache_invalidate(fs->cache, path);
}

static void cache_removed(struct mbfs *fs, const char *path, bool tree)
{
	mbfs_cache_removed(fs->cache, path, tree);
}

static void cache_set_perm(struct mbfs *fs, const char *path, unsigned perm)
{
	mbfs_cache_set_perm(fs->cache, path, perm);
}

static void put_mtime(struct stat *st, const void *arg)
{
	st->st_mtim = *(const struct timespec *)arg;   /* the guest's, exactly */
	st->st_ctim = st->st_mtim;
}

static void cache_set_mtime(struct mbfs *fs, const char *path,
		      const struct timespec *mtime)
{
	mbfs_cache_modify(fs->cache, path, put_mtime, mtime);
}

static int view_shows(struct mbfs *fs, const char *path, struct stat *st)
{
	return mbfs_view_lookup(fs, path, st);
}

const struct mbfs_out_sink mbfs_view_sink = {
	.landed = cache_landed,
	.unsure = cache_unsure,
	.removed = cache_removed,
	.set_perm = cache_set_perm,
	.set_mtime = cache_set_mtime,
	.shows = view_shows,
};
