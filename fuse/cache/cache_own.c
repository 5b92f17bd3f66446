/* cache_own.c: our own changes, applied to the cache in place (cache.h:
 * creates, mkdirs, chmods, removals, renames), with no request: listings
 * keep their expiry. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/cache/cache_int.h"
#include "fuse/cache/kcache.h"
#include "fuse/mbfs.h"

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

/* An entry was made in or removed from the directory of path: its mtime
 * and ctime become now, in whole seconds like the guest's, wherever they
 * are known (rsync -a and make compare them; the guest's own have moved).
 * Lock held. */
static void dir_changed_locked(struct mbfs_cache *c, const char *path)
{
	char dir[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(dir))
		return;
	mbfs_parent_path(path, dir);
	struct timespec now = { .tv_sec = time(NULL), .tv_nsec = 0 };
	struct centry *e = mbfs_cache_find(c, dir);
	if (e && e->attr_until)
		e->st.st_mtim = e->st.st_ctim = now;
	const char *name;
	struct centry *p = parent_listing(c, dir, &name);
	struct child *k = p ? mbfs_cache_kid(p, name) : NULL;
	if (k)
		k->st.st_mtim = k->st.st_ctim = now;
}

void mbfs_cache_dir_changed(struct mbfs_cache *c, const char *path)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	dir_changed_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

static void put_locked(struct mbfs_cache *c, const char *path,
		       const struct stat *st)
{
	mbfs_cache_put_attr_locked(c, path, st, false);
	struct centry *e = mbfs_cache_find(c, path);
	if (e)
		e->neg_until = 0;
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	if (p)
		mbfs_cache_kid_put(p, name, st);
	dir_changed_locked(c, path);
}

void mbfs_cache_put(struct mbfs_cache *c, const char *path,
		    const struct stat *st)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	put_locked(c, path, st);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_put_dir(struct mbfs_cache *c, const char *path,
			const struct stat *st)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	put_locked(c, path, st);
	struct centry *e = c->dir_ms ? mbfs_cache_add(c, path) : NULL;
	if (e) {
		mbfs_cache_free_kids(e);
		e->dir_until = mb_now_ms() + c->dir_ms;
	}
	pthread_mutex_unlock(&c->lock);
}

static void set_perm(struct stat *st, const void *arg)
{
	st->st_mode = (st->st_mode & S_IFMT) | (*(const unsigned *)arg & 07777);
}

void mbfs_cache_set_perm(struct mbfs_cache *c, const char *path,
			 unsigned perm)
{
	mbfs_cache_modify(c, path, set_perm, &perm);
}

void mbfs_cache_modify(struct mbfs_cache *c, const char *path,
		       void (*fn)(struct stat *st, const void *arg),
		       const void *arg)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	bool changed = false;
	struct centry *e = mbfs_cache_find(c, path);
	if (e && e->attr_until) {
		struct stat before = e->st;
		fn(&e->st, arg);
		changed = mbfs_cache_st_differs(&before, &e->st);
	}
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	struct child *k = p ? mbfs_cache_kid(p, name) : NULL;
	if (k) {
		struct stat before = k->st;
		fn(&k->st, arg);
		changed = changed || mbfs_cache_st_differs(&before, &k->st);
	}
	/* an upload moved the mtime after the kernel last asked */
	if (changed)
		mbfs_kcache_stale(c->kc, path);
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
	mbfs_cache_forget_locked(c, path);
	if (c->neg_ms) {
		struct centry *e = mbfs_cache_add(c, path);
		if (e)
			e->neg_until = mb_now_ms() + c->neg_ms;
	}
	const char *name;
	struct centry *p = parent_listing(c, path, &name);
	if (p)
		mbfs_cache_kid_remove(p, name);
	dir_changed_locked(c, path);
}

void mbfs_cache_removed(struct mbfs_cache *c, const char *path, bool tree)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, path);
	removed_locked(c, path, tree);
	pthread_mutex_unlock(&c->lock);
}

void mbfs_cache_renamed(struct mbfs_cache *c, const char *from, const char *to)
{
	pthread_mutex_lock(&c->lock);
	mbfs_cache_bump_locked(c, from);
	mbfs_cache_bump_locked(c, to);
	struct stat st;
	int known = mbfs_cache_lookup_locked(c, from, &st) == 1;
	/* a directory's subtree is forgotten rather than moved */
	bool tree = !known || S_ISDIR(st.st_mode);
	removed_locked(c, from, tree);
	if (tree)
		forget_below_locked(c, to);
	if (known) {
		put_locked(c, to, &st);
	} else {
		mbfs_cache_forget_locked(c, to);
		mbfs_cache_forget_parent_locked(c, to);
		dir_changed_locked(c, to);
	}
	pthread_mutex_unlock(&c->lock);
}
