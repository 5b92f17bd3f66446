/* view.h: what a path shows through the mount, composed in one place: the
 * sandbox's attributes as the cache has them (cache.h), overlaid by what
 * is queued for the sandbox (times: batch.h; removals: wbq.h). The FUSE face (ops.c) shows
 * paths through it; a module deciding something about the sandbox's own
 * file (a load, an upload's base) asks the cache itself. Sends nothing
 * the cache would not. */
#ifndef MBFS_VIEW_H
#define MBFS_VIEW_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fuse/cache/cache.h"

struct mbfs;

/* Is path removed here, its removal (or one of a directory above it) not
 * on the sandbox yet, and not made again since? A file made again is
 * shown by its node, which the caller asks first. */
bool mbfs_view_gone(struct mbfs *fs, const char *path);

/* What the sandbox will have once its queued mkdirs land: a directory
 * whose mkdir is queued (and what is below one: -ENOENT) is answered by
 * newdir.h, never the guest; the rest is mbfs_cache_getattr. */
int mbfs_view_lookup(struct mbfs *fs, const char *path, struct stat *st);

/* mbfs_view_lookup, with queued times applied and queued removals
 * gone. Same returns. */
int mbfs_view_getattr(struct mbfs *fs, const char *path, struct stat *st);

/* mbfs_cache_refresh (the guest asked), a queued removal gone, a queued
 * mkdir answered here. */
int mbfs_view_refresh(struct mbfs *fs, const char *path, struct stat *st);

/* Is path a directory whose mkdir is queued, or below one? Nothing of it
 * is on the sandbox to list (a bulk listing is not asked for). */
bool mbfs_view_made_here(struct mbfs *fs, const char *path);

/* mbfs_cache_readdir, but nothing for a directory whose mkdir is queued
 * (what is in it was made here: node.h lists it). */
int mbfs_view_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		      void *ud);

#endif
