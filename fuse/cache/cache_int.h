/* cache_int.h: the inside of the cache (cache.c: lookups and fetches;
 * cache_own.c: our own changes; cache_tab.c: the table and its one-entry
 * edits). Not for other modules. Every function here runs with
 * cache->lock held (mbfs_cache_st_differs needs none). */
#ifndef MBFS_CACHE_INT_H
#define MBFS_CACHE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct mbfs_kcache;

struct child {
	char *name;
	struct stat st;
	bool exact;     /* st's time to the nanosecond (a guest listing's),
			   also a whole second */
};

struct centry {
	struct centry *next;
	char *path;
	uint64_t hash;
	uint64_t attr_until;        /* 0: no attributes */
	uint64_t neg_until;         /* 0: not negative */
	uint64_t dir_until;         /* 0: no listing */
	uint64_t used_ms;           /* when a lookup or a readdir last took
	                               its answer from the listing: what a
	                               user is working in. A listing fetched
	                               again (a relist of all held) is not
	                               used by that (mbfs_cache_held_dirs) */
	uint64_t large_until;       /* until then a lookup of a name in this
	                               directory stats it: the first page of
	                               its listing was not all of it */
	struct stat st;
	struct child *kids;         /* sorted by name (strcmp), no duplicates */
	size_t nkids, capkids;
};

/* A listing fetched for a lookup, in flight: lookups of other names in
 * the same directory wait for it rather than list or stat themselves. */
struct dirload {
	struct dirload *next;
	const char *path;           /* the directory (the loader's copy) */
};

struct mbfs_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded;      /* a dirload ended */
	struct dirload *loads;      /* protected by lock */
	struct centry **tab;        /* protected by lock */
	size_t nbuckets, count;
	uint64_t counter;           /* write counter, bumped by every change */
	struct cache_change *changes;   /* the last CACHE_CHANGES of them */
	unsigned puts;
	uint64_t attr_ms, dir_ms, neg_ms;
	struct mbfs_kcache *kc;     /* told when what the kernel may hold
	                               changed (kcache.h); NULL: nobody */
};

/* A change that moved the write counter to at: of path (its attributes,
 * its entry in its directory's listing, that directory's times, anything
 * below it), or of everything (path NULL). */
#define CACHE_CHANGES 4096u
struct cache_change {
	uint64_t at;
	char *path;
};

/* Move the write counter for a change of path (NULL: of everything),
 * noted so that a listing fetched meanwhile of a directory the change
 * did not touch is still kept. Lock held. */
void mbfs_cache_bump_locked(struct mbfs_cache *c, const char *path);
/* Did a change since the counter was ctr touch path's listing? (Also
 * when the changes since are too many to tell.) Lock held. */
bool mbfs_cache_changed_since_locked(struct mbfs_cache *c, const char *path,
				     uint64_t ctr);

/* The entry of path, or NULL. */
struct centry *mbfs_cache_find(struct mbfs_cache *c, const char *path);
/* The entry of path, added (empty) when missing; NULL without memory. */
struct centry *mbfs_cache_add(struct mbfs_cache *c, const char *path);
/* Drop every entry. */
void mbfs_cache_clear(struct mbfs_cache *c);
/* Drop e's listing (and what its first page told). */
void mbfs_cache_free_kids(struct centry *e);
/* The child called name in e's listing, or NULL. */
struct child *mbfs_cache_kid(struct centry *e, const char *name);
/* Add or replace a child, keeping the listing sorted; without memory the
 * listing is dropped (it would no longer be complete). */
void mbfs_cache_kid_put(struct centry *e, const char *name,
			const struct stat *st);
void mbfs_cache_kid_remove(struct centry *e, const char *name);
/* Sort n children by name and drop repeated names (freed): the new n. */
size_t mbfs_cache_kids_sort(struct child *kids, size_t n);

/* Would the kernel show b differently from a? A whole second (the
 * guest's) and a finer time in it (ours) are one time. */
bool mbfs_cache_st_differs(const struct stat *a, const struct stat *b);
/* The same for b known to the nanosecond (exact: a guest listing's),
 * whose whole second is a time of its own, not the list route's. */
bool mbfs_cache_st_differs_exact(const struct stat *a, const struct stat *b,
				 bool exact);
/* Look path up. 1 with *st (fresh attributes), -ENOENT (fresh negative,
 * or absent from a fresh parent listing), 0 when unknown. */
int mbfs_cache_lookup_locked(struct mbfs_cache *c, const char *path,
			     struct stat *st);
/* path's attributes are st, from now for attr_ms (the kernel told when
 * they differ from what it may hold; exact as for
 * mbfs_cache_st_differs_exact). */
void mbfs_cache_put_attr_locked(struct mbfs_cache *c, const char *path,
				const struct stat *st, bool exact);
/* Forget path's attributes, negative mark and listing. */
void mbfs_cache_forget_locked(struct mbfs_cache *c, const char *path);
/* Forget the listing of path's directory. */
void mbfs_cache_forget_parent_locked(struct mbfs_cache *c, const char *path);

#endif
