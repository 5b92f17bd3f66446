/* cache.c: the attribute / listing / negative cache (see cache.h).
 *
 * A chained hash table keyed by mount-relative path. An entry holds any of:
 * attributes (until attr_until), a negative mark (until neg_until), a
 * listing with each child's attributes, sorted by name (until dir_until).
 * Expired parts are ignored and swept now and then. Our own changes edit
 * entries and listings in place without extending them. Time is the
 * monotonic clock in ms.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/cache_int.h"
#include "fuse/mbfs.h"

void mbfs_parent_path(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (n == 0) {
		strcpy(out, "/");
		return;
	}
	memcpy(out, path, n);
	out[n] = '\0';
}

static void join_path(const char *dir, const char *name, char *out, size_t n)
{
	if (strcmp(dir, "/") == 0)
		snprintf(out, n, "/%s", name);
	else
		snprintf(out, n, "%s/%s", dir, name);
}

/* Look path up. 1 with *st (fresh attributes), -ENOENT (fresh negative, or
 * absent from a fresh parent listing), 0 when unknown. Lock held. */
static int lookup_locked(struct mbfs_cache *c, const char *path,
			 struct stat *st)
{
	uint64_t now = mb_now_ms();
	struct centry *e = mbfs_cache_find(c, path);
	if (e && e->attr_until > now) {
		*st = e->st;
		return 1;
	}
	if (e && e->neg_until > now)
		return -ENOENT;
	if (strcmp(path, "/") == 0)
		return 0;
	char parent[MB_PATH_MAX];
	if (strlen(path) >= sizeof(parent))
		return 0;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (!p || p->dir_until <= now)
		return 0;
	struct child *k = mbfs_cache_kid(p, strrchr(path, '/') + 1);
	if (!k)
		return -ENOENT;
	*st = k->st;
	return 1;
}

static void put_attr_locked(struct mbfs_cache *c, const char *path,
			    const struct stat *st)
{
	if (!c->attr_ms)
		return;
	struct centry *e = mbfs_cache_add(c, path);
	if (!e)
		return;
	e->st = *st;
	e->attr_until = mb_now_ms() + c->attr_ms;
	e->neg_until = 0;
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
	rc = mb_fs_stat(fs->client, &fs->ident, rpath, false, &ent, &err);
	if (rc == 0)
		mbfs_entry_stat(fs, &ent, st);

	pthread_mutex_lock(&c->lock);
	if (c->counter == ctr) {
		if (rc == 0) {
			put_attr_locked(c, path, st);
		} else if (rc == -ENOENT && c->neg_ms) {
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

/* Store a listing and its children's attributes. Lock held. */
static void put_listing_locked(struct mbfs_cache *c, const char *path,
			       struct child *kids, size_t n)
{
	uint64_t now = mb_now_ms();
	char cpath[MB_PATH_MAX];
	for (size_t i = 0; i < n; i++) {
		join_path(path, kids[i].name, cpath, sizeof(cpath));
		put_attr_locked(c, cpath, &kids[i].st);
	}
	struct centry *e = mbfs_cache_add(c, path);
	if (!e || !c->dir_ms) {
		for (size_t i = 0; i < n; i++)
			free(kids[i].name);
		free(kids);
		return;
	}
	/* pages of a changing directory may repeat a name */
	size_t m = mbfs_cache_kids_sort(kids, n);
	mbfs_cache_free_kids(e);
	e->kids = kids;
	e->nkids = m;
	e->capkids = n ? n : 1;
	e->dir_until = now + c->dir_ms;
}

/* List path on the guest (every page), give each entry to fn (may be
 * NULL) and store the listing unless something changed meanwhile. */
static int fetch_listing(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
			 void *ud)
{
	struct mbfs_cache *c = fs->cache;
	/* the listing carries its entries' times: queued ones land first */
	mbfs_batch_flush(fs, path, MBFS_BATCH_CHILDREN);
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
	rc = mb_fs_list_all(fs->client, &fs->ident, rpath, &list, &err);
	if (rc)
		return mbfs_fail(fs, rc, &err);

	struct child *kids = calloc(list.n ? list.n : 1, sizeof(*kids));
	size_t n = 0;
	if (!kids) {
		mb_entry_list_release(&list);
		return -ENOMEM;
	}
	for (size_t i = 0; i < list.n; i++) {
		kids[n].name = strdup(list.v[i].name);
		if (!kids[n].name)
			continue;
		mbfs_entry_stat(fs, &list.v[i], &kids[n].st);
		n++;
	}
	mb_entry_list_release(&list);

	for (size_t i = 0; fn && i < n; i++)
		if (fn(ud, kids[i].name, &kids[i].st))
			break;

	pthread_mutex_lock(&c->lock);
	if (c->counter == ctr) {
		put_listing_locked(c, path, kids, n);
		kids = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (kids) {
		for (size_t i = 0; i < n; i++)
			free(kids[i].name);
		free(kids);
	}
	return 0;
}

int mbfs_cache_readdir(struct mbfs *fs, const char *path, mbfs_dir_fn fn,
		       void *ud)
{
	struct mbfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	struct centry *e = mbfs_cache_find(c, path);
	if (e && e->dir_until > mb_now_ms()) {
		int rc = emit(e, fn, ud);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	pthread_mutex_unlock(&c->lock);
	return fetch_listing(fs, path, fn, ud);
}

/* Whether the listing of path's parent (into parent) has expired but was
 * complete and fits one page: listing it again costs one request, like
 * the stat it replaces, and answers the lookups that follow too (a long
 * `tar x` into one directory). Lock held. */
static bool stale_small_listing(struct mbfs_cache *c, const char *path,
				char *parent)
{
	if (!c->dir_ms || strcmp(path, "/") == 0 || strlen(path) >= MB_PATH_MAX)
		return false;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	return p && p->dir_until && p->dir_until <= mb_now_ms() &&
	       p->nkids < MB_MAX_LIST_ENTRIES;
}

int mbfs_cache_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	struct mbfs_cache *c = fs->cache;
	char parent[MB_PATH_MAX];
	pthread_mutex_lock(&c->lock);
	int hit = lookup_locked(c, path, st);
	bool relist = hit == 0 && stale_small_listing(c, path, parent);
	pthread_mutex_unlock(&c->lock);
	if (relist && fetch_listing(fs, parent, NULL, NULL) == 0) {
		pthread_mutex_lock(&c->lock);
		hit = lookup_locked(c, path, st);
		pthread_mutex_unlock(&c->lock);
	}
	if (hit == 0)
		hit = fetch_attr(fs, path, st);
	else if (hit == 1)
		hit = 0;
	if (hit == 0)
		mbfs_batch_apply(fs, path, st);
	return hit;
}

int mbfs_cache_refresh(struct mbfs *fs, const char *path, struct stat *st)
{
	return fetch_attr(fs, path, st);
}

static void forget_locked(struct mbfs_cache *c, const char *path)
{
	struct centry *e = mbfs_cache_find(c, path);
	if (e) {
		e->attr_until = 0;
		e->neg_until = 0;
		mbfs_cache_free_kids(e);
	}
}

static void forget_parent_locked(struct mbfs_cache *c, const char *path)
{
	char parent[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(parent))
		return;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (p)
		mbfs_cache_free_kids(p);
}

void mbfs_cache_invalidate(struct mbfs_cache *c, const char *path)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	forget_locked(c, path);
	forget_parent_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_invalidate_tree(struct mbfs_cache *c, const char *path)
{
	size_t n = strlen(path);
	pthread_mutex_lock(&c->lock);
	c->counter++;
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
	forget_parent_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_invalidate_all(struct mbfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	mbfs_cache_clear(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- our own changes, applied in place ---- */

/* The fresh listing of path's parent and path's name in it, or NULL. */
static struct centry *parent_listing(struct mbfs_cache *c, const char *path,
				     const char **name)
{
	char parent[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(parent))
		return NULL;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (!p || p->dir_until <= mb_now_ms())
		return NULL;
	*name = strrchr(path, '/') + 1;
	return p;
}

static void put_locked(struct mbfs_cache *c, const char *path,
		       const struct stat *st)
{
	put_attr_locked(c, path, st);
	struct centry *e = mbfs_cache_find(c, path);
	if (e)
		e->neg_until = 0;
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	if (p)
		mbfs_cache_kid_put(p, name, st);
}

void mbfs_cache_put(struct mbfs_cache *c, const char *path,
		    const struct stat *st)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	put_locked(c, path, st);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_put_dir(struct mbfs_cache *c, const char *path,
			const struct stat *st)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	put_locked(c, path, st);
	struct centry *e = c->dir_ms ? mbfs_cache_add(c, path) : NULL;
	if (e) {
		mbfs_cache_free_kids(e);
		e->dir_until = mb_now_ms() + c->dir_ms;
	}
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_modify(struct mbfs_cache *c, const char *path,
		       void (*fn)(struct stat *st, const void *arg),
		       const void *arg)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	struct centry *e = mbfs_cache_find(c, path);
	if (e && e->attr_until)
		fn(&e->st, arg);
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	struct child *k = p ? mbfs_cache_kid(p, name) : NULL;
	if (k)
		fn(&k->st, arg);
	pthread_mutex_unlock(&c->lock);
}

/* Forget everything strictly below path. Lock held. */
static void forget_below_locked(struct mbfs_cache *c, const char *path)
{
	size_t n = strcmp(path, "/") == 0 ? 0 : strlen(path);
	for (size_t i = 0; i < c->nbuckets; i++) {
		for (struct centry *e = c->tab[i]; e; e = e->next) {
			if (strncmp(e->path, path, n) == 0 && e->path[n] == '/' &&
			    e->path[n + 1] != '\0') {
				e->attr_until = 0;
				e->neg_until = 0;
				mbfs_cache_free_kids(e);
			}
		}
	}
}

/* path is gone: negative, out of its parent's listing, nothing below. */
static void removed_locked(struct mbfs_cache *c, const char *path, bool tree)
{
	if (tree)
		forget_below_locked(c, path);
	forget_locked(c, path);
	if (c->neg_ms) {
		struct centry *e = mbfs_cache_add(c, path);
		if (e)
			e->neg_until = mb_now_ms() + c->neg_ms;
	}
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	if (p)
		mbfs_cache_kid_remove(p, name);
}

void mbfs_cache_removed(struct mbfs_cache *c, const char *path, bool tree)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	removed_locked(c, path, tree);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_renamed(struct mbfs_cache *c, const char *from, const char *to)
{
	pthread_mutex_lock(&c->lock);
	c->counter++;
	struct stat st;
	int known = lookup_locked(c, from, &st) == 1;
	/* a directory's subtree is forgotten rather than moved */
	bool tree = !known || S_ISDIR(st.st_mode);
	removed_locked(c, from, tree);
	if (tree)
		forget_below_locked(c, to);
	if (known) {
		put_locked(c, to, &st);
	} else {
		forget_locked(c, to);
		forget_parent_locked(c, to);
	}
	pthread_mutex_unlock(&c->lock);
}
