/* cache.h: attributes, directory listings and negative entries in memory.
 *
 * A decorator over the stat and list routes (like sshfs cache.c): answers
 * from a path-keyed table while an entry is fresh, otherwise asks the API and
 * remembers the answer. Every local change invalidates the affected entries
 * at once and bumps a write counter; an answer fetched while the counter
 * moved is returned but not stored, so a stat that raced with our own write
 * never caches the old attributes. Paths are mount-relative ("/", "/a/b").
 * Does not know about open files (node.c overrides sizes of dirty files).
 * Thread-safe; cache->lock is a leaf lock, never held across a request.
 */
#ifndef MBFS_CACHE_H
#define MBFS_CACHE_H

#include <stdint.h>
#include <sys/stat.h>

struct mbfs;
struct mbfs_cache;

struct mbfs_cache *mbfs_cache_new(uint64_t attr_ms, uint64_t dir_ms,
				  uint64_t neg_ms);
void mbfs_cache_free(struct mbfs_cache *c);

/* Attributes of path: from memory, from a fresh parent listing, or one stat
 * request. 0 with *st, -ENOENT (possibly cached), or another -errno. */
int mbfs_cache_getattr(struct mbfs *fs, const char *path, struct stat *st);

/* Like getattr but always asks the API (and refreshes the cache). */
int mbfs_cache_refresh(struct mbfs *fs, const char *path, struct stat *st);

/* Called once per entry of a listing (name, attributes); non-zero stops. */
typedef int (*mbfs_dir_fn)(void *ud, const char *name, const struct stat *st);

/* List path: from a fresh cached listing, or every page of the list route
 * (which also fills the attributes of each child). 0 or -errno. */
int mbfs_cache_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		       void *ud);

/* Forget path (attributes, negative entry, its listing) and the listing of
 * its parent. */
void mbfs_cache_invalidate(struct mbfs_cache *c, const char *path);
/* Forget path and everything below it, and the listing of its parent. */
void mbfs_cache_invalidate_tree(struct mbfs_cache *c, const char *path);
/* Forget everything. */
void mbfs_cache_invalidate_all(struct mbfs_cache *c);

/* Copy the parent directory of path ("/a/b" -> "/a", "/a" -> "/") into out
 * (same size as path + 2). */
void mbfs_parent_path(const char *path, char *out);

#endif
