/* cache.h: attributes, directory listings and negative entries in memory.
 *
 * A decorator over the stat and list routes (like sshfs cache.c): answers
 * from a path-keyed table while an entry is fresh, otherwise asks the API and
 * remembers the answer. Every local change invalidates the affected entries
 * at once and bumps a write counter; an answer fetched while the counter
 * moved is returned but not stored, so a stat that raced with our own write
 * never caches the old attributes. Paths are mount-relative ("/", "/a/b").
 * Every listing taken, whatever its source, goes through mbfs_name_filter
 * (name.h): mbfs's reserved names and names no directory can hold are
 * never listed, and a lookup of a reserved name is ENOENT. Does not know
 * about open files (node.c overrides sizes of dirty files).
 * Thread-safe; cache->lock is a leaf lock, never held across a request.
 */
#ifndef MBFS_CACHE_H
#define MBFS_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/api.h"

struct mbfs;
struct mbfs_cache;
struct mbfs_kcache;

struct mbfs_cache *mbfs_cache_new(uint64_t attr_ms, uint64_t dir_ms,
				  uint64_t neg_ms);
void mbfs_cache_free(struct mbfs_cache *c);
/* From now on, tell kc of every path whose attributes the kernel may hold
 * stale: an answer from the guest that differs from the one remembered
 * (type, mode, size, mtime), a name gone from a new listing, an own change
 * applied in place (an upload), a path invalidated. Set once, before the
 * mount is used. */
void mbfs_cache_set_kcache(struct mbfs_cache *c, struct mbfs_kcache *kc);

/* Attributes of path on the guest (what is queued for it is the
 * outbox's: view.h overlays it): from memory, from a fresh parent listing, or one
 * request: the first page of the parent's listing when it has none
 * (stored: it answers the lookups of the names that follow, and when
 * complete, of names that are not there), or a stat when the parent has
 * more than one page (or cannot be listed) and the name is not on the
 * first. Concurrent lookups in one directory share one listing. What the
 * guest has.
 * 0 with *st, -ENOENT (possibly cached), -ENOTDIR (the parent is not a
 * directory on the guest), or another -errno. */
int mbfs_cache_getattr(struct mbfs *fs, const char *path, struct stat *st);

/* Like getattr but always asks the API (and refreshes the cache). */
int mbfs_cache_refresh(struct mbfs *fs, const char *path, struct stat *st);

/* Called once per entry of a listing (name, attributes); non-zero stops. */
typedef int (*mbfs_dir_fn)(void *ud, const char *name, const struct stat *st);

/* List path: from a fresh cached listing, or every page of the list route
 * (which also fills the attributes of each child). 0 or -errno. */
int mbfs_cache_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		       void *ud);

/* Is a fresh listing of path cached? */
bool mbfs_cache_listed(struct mbfs_cache *c, const char *path);
/* The directories whose listing is held now, or expired less than
 * grace_ms ago, with at most max_kids entries each: at most max of them,
 * the most recently used by a lookup or a readdir first (then the most
 * recently listed), into out (each MB_PATH_MAX long); then,
 * up to max_all in all, the held directories above those (the way back
 * to them: a listing refreshed elsewhere must not push out the root).
 * How many. */
size_t mbfs_cache_held_dirs(struct mbfs_cache *c, char (*out)[MB_PATH_MAX],
			    size_t max, size_t max_all, size_t max_kids,
			    uint64_t grace_ms);
/* Would a getattr of path now list its parent (a lookup the cache cannot
 * answer)? */
bool mbfs_cache_lists_for(struct mbfs_cache *c, const char *path);
/* Would it stat path (the root, a name in a large directory)? */
bool mbfs_cache_stats_for(struct mbfs_cache *c, const char *path);

/* The write counter (for mbfs_cache_put_listing). */
uint64_t mbfs_cache_counter(struct mbfs_cache *c);
/* A listing of path the guest gave otherwise (a bulk read's, pack.h),
 * taken (released here): filtered by mbfs_name_filter (name.h: the caller
 * need not check names) and stored as a list request's would be, unless
 * the write counter moved from ctr, read before the guest was asked.
 * follow: a follow round's look (follow.h), which keeps the expiry of the
 * listing held, so that a directory is followed only as long as a
 * listing someone asked for lasts. */
void mbfs_cache_put_listing(struct mbfs *fs, const char *path,
			    struct mb_entry_list *list, uint64_t ctr,
			    bool follow);

/* Attributes of path the guest gave otherwise (a directory's own, in
 * follow.sh's listings), stored as a stat's would be, unless a change of
 * ours since ctr touched path's listing. */
void mbfs_cache_put_seen(struct mbfs *fs, const char *path,
			 const struct mb_entry *e, uint64_t ctr);

/* Our own changes, applied in place (no request; each bumps the write
 * counter). Listings keep their expiry: what we did ourselves does not make
 * them any fresher with respect to changes made on the guest. */

/* We know path's attributes (our create, mkdir, symlink, upload): store
 * them, drop a negative mark, add or update path in its parent's listing,
 * whose mtime becomes now (mbfs_cache_dir_changed). */
void mbfs_cache_put(struct mbfs_cache *c, const char *path,
		    const struct stat *st);
/* Same for a directory we have just made: also its listing, complete and
 * empty, so lookups of names in it need no request. */
void mbfs_cache_put_dir(struct mbfs_cache *c, const char *path,
			const struct stat *st);
/* Apply fn to whatever is known of path's attributes (its entry and its
 * child in the parent's listing); nothing known: nothing done. */
void mbfs_cache_modify(struct mbfs_cache *c, const char *path,
		       void (*fn)(struct stat *st, const void *arg),
		       const void *arg);
/* The same, setting the permission bits of path to perm (a chmod). */
void mbfs_cache_set_perm(struct mbfs_cache *c, const char *path,
			 unsigned perm);
/* path is gone (our unlink, rmdir): negative, out of the parent's listing;
 * tree: everything below it forgotten. */
void mbfs_cache_removed(struct mbfs_cache *c, const char *path, bool tree);
/* from became to (replacing it): to takes from's attributes when known
 * (otherwise to's parent listing is dropped), from is negative; whatever
 * was below either is forgotten. */
void mbfs_cache_renamed(struct mbfs_cache *c, const char *from,
			const char *to);

/* An entry was made or removed at path (a link, say): the mtime and ctime
 * of its directory become now, wherever they are known. put, put_dir,
 * removed and renamed do this themselves. */
void mbfs_cache_dir_changed(struct mbfs_cache *c, const char *path);

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
