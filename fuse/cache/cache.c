/* cache.c: the attribute / listing / negative cache (see cache.h).
 *
 * A chained hash table keyed by mount-relative path. An entry holds any of:
 * attributes (until attr_until), a negative mark (until neg_until), a
 * listing with each child's attributes, sorted by name (until dir_until).
 * Expired parts are ignored and swept now and then. A lookup the table
 * cannot answer lists the parent's first page (lookup_listing): one
 * request per directory however many of its names are looked up. Our own
 * changes (cache_own.c) edit entries and listings in place without
 * extending them. Time
 * is the monotonic clock in ms. Whatever replaces attributes the kernel
 * may hold (expired ones included: the kernel may have fetched them late)
 * with different ones is told to kcache.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/cache/cache_int.h"
#include "fuse/cache/kcache.h"
#include "fuse/mbfs.h"
#include "fuse/transport/name.h"
#include "fuse/transport/route.h"

/* dir/name into out; false when it does not fit. */
static bool join_path(const char *dir, const char *name, char *out, size_t n)
{
	int r = snprintf(out, n, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir,
			 name);
	return r >= 0 && (size_t)r < n;
}

void mbfs_cache_set_kcache(struct mbfs_cache *c, struct mbfs_kcache *kc)
{
	pthread_mutex_lock(&c->lock);
	c->kc = kc;
	pthread_mutex_unlock(&c->lock);
}

/* The list and stat routes give whole seconds, ours (a batch's) and a
 * guest listing's are exact (exact: st's is one of those): a route's whole
 * second that matches what we knew keeps the finer time, or the mtime
 * would step back (make: "up to date"). */
static void keep_finer_locked(struct mbfs_cache *c, const char *path,
			      struct stat *st, bool exact)
{
	const struct centry *e = mbfs_cache_find(c, path);
	if (exact || !e || st->st_mtim.tv_nsec || !e->st.st_mtim.tv_nsec ||
	    e->st.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	    e->st.st_size != st->st_size ||
	    (e->st.st_mode & S_IFMT) != (st->st_mode & S_IFMT))
		return;
	st->st_mtim.tv_nsec = e->st.st_mtim.tv_nsec;
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* Attributes the guest gave for path (finer times kept already), which
 * the kernel may hold as missing (kcache.h). */
static void put_seen_locked(struct mbfs_cache *c, const char *path,
			    const struct stat *st, bool exact)
{
	mbfs_kcache_appeared(c->kc, path);
	mbfs_cache_put_attr_locked(c, path, st, exact);
}

/* The same for attributes as the guest gave them; st may take a finer
 * time from what was known. */
static void put_fetched_locked(struct mbfs_cache *c, const char *path,
			       struct stat *st, bool exact)
{
	keep_finer_locked(c, path, st, exact);
	put_seen_locked(c, path, st, exact);
}

static int fetch_attr(struct mbfs *fs, const char *path, struct stat *st)
{
	struct mbfs_cache *c = fs->cache;
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	uint64_t ctr = c->counter;
	pthread_mutex_unlock(&c->lock);

	struct mb_entry ent;
	struct mb_err err;
	memset(&ent, 0, sizeof(ent));
	mb_err_clear(&err);
	rc = mbfs_route_lstat(fs, rpath, &ent, &err);
	if (rc == 0)
		mbfs_entry_stat(fs, &ent, st);

	pthread_mutex_lock(&c->lock);
	if (c->counter == ctr) {
		if (rc == 0) {
			put_fetched_locked(c, path, st, false);
		} else if (rc == -ENOENT) {
			struct centry *old = mbfs_cache_find(c, path);
			if (old && old->attr_until) {
				mbfs_kcache_stale(c->kc, path);   /* gone */
				old->attr_until = 0;
			}
		}
		if (rc == -ENOENT && c->neg_ms) {
			struct centry *e = mbfs_cache_add(c, path);
			if (e) {
				e->attr_until = 0;
				e->neg_until = mb_now_ms() + c->neg_ms;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc == 0)
		mb_entry_release(&ent);
	else if (rc != -ENOENT)
		return mbfs_fail(fs, rc, &err);
	return rc;
}

static int emit(struct centry *e, mbfs_dir_fn fn, void *ud)
{
	for (size_t i = 0; i < e->nkids; i++)
		if (fn(ud, e->kids[i].name, &e->kids[i].st))
			break;
	return 0;
}

/* A new listing of dir (sorted) against the one remembered, expired or
 * not: names changed or gone are stale for the kernel. Lock held. */
static void compare_listing_locked(struct mbfs_cache *c, const char *dir,
				   const struct centry *old,
				   const struct child *kids, size_t n)
{
	char cpath[MB_PATH_MAX];
	size_t j = 0;
	for (size_t i = 0; i < old->nkids; i++) {
		const struct child *k = &old->kids[i];
		while (j < n && strcmp(kids[j].name, k->name) < 0)
			j++;
		bool gone = j >= n || strcmp(kids[j].name, k->name) != 0;
		if (!gone && !mbfs_cache_st_differs_exact(&k->st, &kids[j].st,
							  kids[j].exact))
			continue;
		if (!join_path(dir, k->name, cpath, sizeof(cpath)))
			continue;
		mbfs_kcache_stale(c->kc, cpath);
	}
}

/* Store a listing and its children's attributes. Lock held. keep: a
 * listing held keeps its expiry (a follow round's look, cache.h). */
static void put_listing_locked(struct mbfs_cache *c, const char *path,
			       struct child *kids, size_t n, bool keep)
{
	uint64_t now = mb_now_ms();
	char cpath[MB_PATH_MAX];
	/* pages of a changing directory may repeat a name */
	n = mbfs_cache_kids_sort(kids, n);
	for (size_t i = 0; i < n; i++) {
		if (join_path(path, kids[i].name, cpath, sizeof(cpath)))
			keep_finer_locked(c, cpath, &kids[i].st, kids[i].exact);
	}
	struct centry *old = mbfs_cache_find(c, path);
	uint64_t until = now + c->dir_ms;
	if (keep)   /* never longer, also for an answer that came late */
		until = old && old->dir_until < until ? old->dir_until : now;
	if (old && old->kids)
		compare_listing_locked(c, path, old, kids, n);
	for (size_t i = 0; i < n; i++) {
		if (join_path(path, kids[i].name, cpath, sizeof(cpath)))
			put_seen_locked(c, cpath, &kids[i].st, kids[i].exact);
	}
	struct centry *e = mbfs_cache_add(c, path);
	if (!e || !c->dir_ms) {
		for (size_t i = 0; i < n; i++)
			free(kids[i].name);
		free(kids);
		return;
	}
	mbfs_cache_free_kids(e);
	e->kids = kids;
	e->nkids = n;
	e->capkids = n ? n : 1;
	e->dir_until = until;
}

/* The children of path's listing (released), from the list route or a
 * bulk listing, into *kids, *n (the caller frees them): only the names the
 * mount shows (name.h). 0 or -ENOMEM. */
static int take_kids(struct mbfs *fs, const char *path,
		     struct mb_entry_list *list, struct child **kids, size_t *n)
{
	mbfs_name_filter(path, list);
	struct child *k = calloc(list->n ? list->n : 1, sizeof(*k));
	size_t m = 0;
	for (size_t i = 0; k && i < list->n; i++) {
		k[m].name = strdup(list->v[i].name);
		if (!k[m].name)
			continue;
		mbfs_entry_stat(fs, &list->v[i], &k[m].st);
		k[m].exact = list->v[i].mtime_exact;
		m++;
	}
	mb_entry_list_release(list);
	if (!k)
		return -ENOMEM;
	*kids = k;
	*n = m;
	return 0;
}

static void free_kids(struct child *kids, size_t n)
{
	for (size_t i = 0; kids && i < n; i++)
		free(kids[i].name);
	free(kids);
}

/* List path on the guest (every page), give each entry to fn (may be
 * NULL) and store the listing unless something changed meanwhile. */
/* Store kids (taken) as path's listing unless a change of ours touched it
 * since the write counter was ctr: an answer that raced with our own
 * change is not kept (one that raced with a change elsewhere is: a bulk
 * walk while an rm -rf's batches land). */
static void store_listing(struct mbfs_cache *c, const char *path,
			  struct child *kids, size_t n, uint64_t ctr, bool keep)
{
	pthread_mutex_lock(&c->lock);
	if (!mbfs_cache_changed_since_locked(c, path, ctr)) {
		put_listing_locked(c, path, kids, n, keep);
		kids = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	free_kids(kids, n);
}

static int fetch_listing(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
			 void *ud)
{
	struct mbfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	uint64_t ctr = c->counter;
	pthread_mutex_unlock(&c->lock);
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	struct mb_entry_list list = { NULL, 0 };
	struct mb_err err;
	mb_err_clear(&err);
	rc = mbfs_route_list(fs, rpath, &list, NULL, &err);
	if (rc)
		return mbfs_fail(fs, rc, &err);
	struct child *kids;
	size_t n;
	rc = take_kids(fs, path, &list, &kids, &n);
	if (rc)
		return rc;

	for (size_t i = 0; fn && i < n; i++)
		if (fn(ud, kids[i].name, &kids[i].st))
			break;
	store_listing(c, path, kids, n, ctr, false);
	return 0;
}

uint64_t mbfs_cache_counter(struct mbfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t v = c->counter;
	pthread_mutex_unlock(&c->lock);
	return v;
}

void mbfs_cache_put_listing(struct mbfs *fs, const char *path,
			    struct mb_entry_list *list, uint64_t ctr,
			    bool follow)
{
	struct mbfs_cache *c = fs->cache;
	struct child *kids;
	size_t n;
	if (take_kids(fs, path, list, &kids, &n))
		return;
	store_listing(c, path, kids, n, ctr, follow);
}

void mbfs_cache_put_seen(struct mbfs *fs, const char *path,
			 const struct mb_entry *e, uint64_t ctr)
{
	struct mbfs_cache *c = fs->cache;
	struct stat st;
	mbfs_entry_stat(fs, e, &st);
	pthread_mutex_lock(&c->lock);
	if (!mbfs_cache_changed_since_locked(c, path, ctr))
		put_fetched_locked(c, path, &st, e->mtime_exact);
	pthread_mutex_unlock(&c->lock);
}

int mbfs_cache_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		       void *ud)
{
	struct mbfs_cache *c = fs->cache;
	int rc;
	pthread_mutex_lock(&c->lock);
	struct centry *e = mbfs_cache_find(c, path);
	uint64_t now = mb_now_ms();
	if (e && e->dir_until > now) {
		e->used_ms = now;
		rc = emit(e, fn, ud);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	pthread_mutex_unlock(&c->lock);
	return fetch_listing(fs, path, fn, ud);
}

bool mbfs_cache_listed(struct mbfs_cache *c, const char *path)
{
	pthread_mutex_lock(&c->lock);
	struct centry *e = mbfs_cache_find(c, path);
	bool listed = e && e->dir_until > mb_now_ms();
	pthread_mutex_unlock(&c->lock);
	return listed;
}

/* What a lookup of path that the cache cannot answer does. */
enum miss {
	MISS_STAT,      /* one stat of path */
	MISS_LIST,      /* list the parent's first page (lookup_listing) */
	MISS_WAIT,      /* another lookup is listing the parent: wait */
};

static bool loading_locked(struct mbfs_cache *c, const char *dir)
{
	for (struct dirload *l = c->loads; l; l = l->next)
		if (strcmp(l->path, dir) == 0)
			return true;
	return false;
}

/* How to answer a miss of path; the parent into parent. Lock held. */
static enum miss on_miss_locked(struct mbfs_cache *c, const char *path,
				char *parent)
{
	if (!c->dir_ms || strcmp(path, "/") == 0 || strlen(path) >= MB_PATH_MAX)
		return MISS_STAT;
	mbfs_parent_path(path, parent);
	if (loading_locked(c, parent))
		return MISS_WAIT;
	/* a large directory: its first page does not answer every name,
	 * and a stat costs no more than listing it again */
	struct centry *p = mbfs_cache_find(c, parent);
	if (p && (p->large_until > mb_now_ms() ||
		  (p->dir_until && p->nkids >= MB_MAX_LIST_ENTRIES)))
		return MISS_STAT;
	return MISS_LIST;
}

/* e's listing is held (or expired less than grace_ms ago) with at most
 * max_kids entries. c->lock held. */
static bool held_dir(const struct centry *e, uint64_t now, size_t max_kids,
		     uint64_t grace_ms)
{
	return e->dir_until && e->dir_until + grace_ms > now &&
	       e->nkids <= max_kids && strlen(e->path) < MB_PATH_MAX;
}

size_t mbfs_cache_held_dirs(struct mbfs_cache *c, char (*out)[MB_PATH_MAX],
			    size_t max, size_t max_all, size_t max_kids,
			    uint64_t grace_ms)
{
	uint64_t *until = calloc(max ? max : 1, sizeof(*until));
	uint64_t *used = calloc(max ? max : 1, sizeof(*used));
	size_t k = 0;
	if (!until || !used) {
		free(until);
		free(used);
		return 0;
	}
	uint64_t now = mb_now_ms();
	pthread_mutex_lock(&c->lock);
	for (size_t b = 0; b < c->nbuckets; b++) {
		for (struct centry *e = c->tab[b]; e; e = e->next) {
			if (!held_dir(e, now, max_kids, grace_ms))
				continue;
			/* insertion into the max latest used, latest first
			 * (then the latest listed) */
			uint64_t key = e->used_ms;
			size_t i = k < max ? k++ : max;
			while (i > 0 && (used[i - 1] < key ||
					 (used[i - 1] == key &&
					  until[i - 1] < e->dir_until))) {
				if (i < max) {
					until[i] = until[i - 1];
					used[i] = used[i - 1];
					memcpy(out[i], out[i - 1], MB_PATH_MAX);
				}
				i--;
			}
			if (i < max) {
				until[i] = e->dir_until;
				used[i] = key;
				snprintf(out[i], MB_PATH_MAX, "%s", e->path);
			}
		}
	}
	/* the held directories above them, nearest first */
	size_t chosen = k;
	char up[MB_PATH_MAX + 2];
	for (size_t i = 0; i < chosen && k < max_all; i++) {
		snprintf(up, sizeof(up), "%s", out[i]);
		while (strcmp(up, "/") != 0 && k < max_all) {
			char dir[MB_PATH_MAX + 2];
			mbfs_parent_path(up, dir);
			memcpy(up, dir, sizeof(up));
			const struct centry *p = mbfs_cache_find(c, up);
			bool have = false;
			for (size_t j = 0; j < k && !have; j++)
				have = strcmp(out[j], up) == 0;
			size_t ul = strlen(up);
			if (!have && p && held_dir(p, now, max_kids, grace_ms) &&
			    ul < MB_PATH_MAX)
				memcpy(out[k++], up, ul + 1);
		}
	}
	pthread_mutex_unlock(&c->lock);
	free(until);
	free(used);
	return k;
}

bool mbfs_cache_lists_for(struct mbfs_cache *c, const char *path)
{
	char parent[MB_PATH_MAX + 2];
	struct stat st;
	if (mbfs_name_reserved(path))
		return false;   /* ENOENT without a request */
	pthread_mutex_lock(&c->lock);
	bool lists = mbfs_cache_lookup_locked(c, path, &st) == 0 &&
		     on_miss_locked(c, path, parent) == MISS_LIST;
	pthread_mutex_unlock(&c->lock);
	return lists;
}

bool mbfs_cache_stats_for(struct mbfs_cache *c, const char *path)
{
	char parent[MB_PATH_MAX + 2];
	struct stat st;
	if (mbfs_name_reserved(path))
		return false;
	pthread_mutex_lock(&c->lock);
	bool stats = mbfs_cache_lookup_locked(c, path, &st) == 0 &&
		     on_miss_locked(c, path, parent) == MISS_STAT;
	pthread_mutex_unlock(&c->lock);
	return stats;
}

/* The first page of dir's listing (one request) for a lookup of path in
 * dir: git lstat()s every file of its index without reading a directory,
 * and one list answers the lookups of all the entries that follow. Stored
 * unless something changed meanwhile: a complete page as dir's listing
 * (misses are negative), otherwise the attributes of its entries, and
 * dir marked large. Ends load (registered by the caller). 1 with *st,
 * -errno (ENOENT, ENOTDIR: dir is gone or not a directory), or 0 when
 * path is to be stat'ed (beyond the first page, or dir cannot be listed
 * though it may be searchable). */
static int lookup_listing(struct mbfs *fs, const char *dir,
			  struct dirload *load, const char *path,
			  struct stat *st)
{
	struct mbfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	uint64_t ctr = c->counter;
	pthread_mutex_unlock(&c->lock);

	char rpath[MB_PATH_MAX];
	struct mb_entry_list list = { NULL, 0 };
	struct mb_err err;
	struct child *kids = NULL;
	size_t n = 0;
	long next = -1;
	int ans = 0;
	mb_err_clear(&err);
	int rc = mbfs_remote_path(fs, dir, rpath);
	if (rc == 0) {
		rc = mbfs_route_list(fs, rpath, &list, &next, &err);
		if (rc == 0)
			rc = take_kids(fs, dir, &list, &kids, &n);
		else if (rc == -ENOENT || rc == -ENOTDIR ||
			 err.http_status == 0 || mb_err_is_stopped(&err))
			ans = mbfs_fail(fs, rc, &err);
		else
			mb_log(MB_LOG_DEBUG, "cannot list '%s' for a lookup: %s",
			       dir, err.msg[0] ? err.msg : strerror(-rc));
	} else {
		ans = rc;
	}
	if (rc == 0) {
		const char *name = strrchr(path, '/') + 1;
		ans = next < 0 ? -ENOENT : 0;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(kids[i].name, name) == 0) {
				*st = kids[i].st;
				ans = 1;
				break;
			}
		}
	}

	pthread_mutex_lock(&c->lock);
	if (ans == 1)
		keep_finer_locked(c, path, st, false);
	if (c->counter == ctr && rc == 0 && next < 0) {
		put_listing_locked(c, dir, kids, n, false);
		kids = NULL;
	} else if (c->counter == ctr && (rc == 0 || ans == 0)) {
		/* beyond the first page, or not listable: stat the names
		 * this page does not answer */
		char cpath[MB_PATH_MAX];
		for (size_t i = 0; i < n; i++) {
			if (join_path(dir, kids[i].name, cpath, sizeof(cpath)))
				put_fetched_locked(c, cpath, &kids[i].st,
						   kids[i].exact);
		}
		struct centry *e = mbfs_cache_add(c, dir);
		if (e)
			e->large_until = mb_now_ms() + c->dir_ms;
	}
	for (struct dirload **pp = &c->loads; *pp; pp = &(*pp)->next) {
		if (*pp == load) {
			*pp = load->next;
			break;
		}
	}
	pthread_cond_broadcast(&c->loaded);
	pthread_mutex_unlock(&c->lock);
	free_kids(kids, n);
	return ans;
}

int mbfs_cache_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	struct mbfs_cache *c = fs->cache;
	char parent[MB_PATH_MAX];
	if (mbfs_name_reserved(path))
		return -ENOENT;   /* mbfs's own names never show (name.h) */
	int hit;
	struct dirload load = { NULL, parent };
	pthread_mutex_lock(&c->lock);
	hit = mbfs_cache_lookup_locked(c, path, st);
	enum miss how = hit ? MISS_STAT : on_miss_locked(c, path, parent);
	if (how == MISS_WAIT) {
		/* the page being fetched most likely answers; when it does
		 * not (beyond it, or not stored), a stat does */
		while (loading_locked(c, parent))
			pthread_cond_wait(&c->loaded, &c->lock);
		hit = mbfs_cache_lookup_locked(c, path, st);
	} else if (how == MISS_LIST) {
		load.next = c->loads;
		c->loads = &load;
	}
	pthread_mutex_unlock(&c->lock);
	if (how == MISS_LIST)
		hit = lookup_listing(fs, parent, &load, path, st);
	if (hit == 0)
		hit = fetch_attr(fs, path, st);
	else if (hit == 1)
		hit = 0;
	return hit;
}

int mbfs_cache_refresh(struct mbfs *fs, const char *path, struct stat *st)
{
	return fetch_attr(fs, path, st);
}

/* The state of path is unknown: so are its directory's times. */
static void kcache_stale_parent_locked(struct mbfs_cache *c, const char *path)
{
	char parent[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(parent))
		return;
	mbfs_parent_path(path, parent);
	mbfs_kcache_stale(c->kc, parent);
}

void mbfs_cache_invalidate(struct mbfs_cache *c, const char *path)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	mbfs_cache_forget_locked(c, path);
	mbfs_cache_forget_parent_locked(c, path);
	kcache_stale_parent_locked(c, path);
	mbfs_kcache_stale(c->kc, path);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_invalidate_tree(struct mbfs_cache *c, const char *path)
{
	size_t n = strlen(path);
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	for (size_t i = 0; i < c->nbuckets; i++) {
		for (struct centry *e = c->tab[i]; e; e = e->next) {
			if (strncmp(e->path, path, n) == 0 &&
			    (e->path[n] == '\0' || e->path[n] == '/' ||
			     strcmp(path, "/") == 0)) {
				e->attr_until = 0;
				e->neg_until = 0;
				mbfs_cache_free_kids(e);
			}
		}
	}
	mbfs_cache_forget_parent_locked(c, path);
	kcache_stale_parent_locked(c, path);
	mbfs_kcache_stale_tree(c->kc, path);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_invalidate_all(struct mbfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, NULL);
	/* expired, not freed: the whole second a route gives next keeps its
	 * nanoseconds from the time known (keep_finer_locked) */
	for (size_t i = 0; i < c->nbuckets; i++) {
		for (struct centry *e = c->tab[i]; e; e = e->next) {
			e->attr_until = 0;
			e->neg_until = 0;
			mbfs_cache_free_kids(e);
		}
	}
	pthread_mutex_unlock(&c->lock);
}
