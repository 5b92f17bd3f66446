/* cache_tab.c: the table behind cache.c (cache_int.h): a chained hash of
 * entries keyed by path, growing as it fills, swept of entries with
 * nothing fresh left; and the sorted child arrays of listings. No policy:
 * what to keep and for how long is cache.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/cache/cache_int.h"
#include "fuse/cache/kcache.h"
#include "fuse/mbfs.h"

static uint64_t hash_path(const char *s)
{
	return mbfs_fnv1a(MBFS_FNV_OFFSET, s);
}

static int kid_cmp(const void *a, const void *b)
{
	return strcmp(((const struct child *)a)->name,
		      ((const struct child *)b)->name);
}

/* The child called name in a listing, or NULL. */
struct child *mbfs_cache_kid(struct centry *e, const char *name)
{
	struct child key = { .name = (char *)name };
	if (!e->nkids)
		return NULL;
	return bsearch(&key, e->kids, e->nkids, sizeof(*e->kids), kid_cmp);
}

void mbfs_cache_free_kids(struct centry *e)
{
	for (size_t i = 0; i < e->nkids; i++)
		free(e->kids[i].name);
	free(e->kids);
	e->kids = NULL;
	e->nkids = 0;
	e->capkids = 0;
	e->dir_until = 0;
	e->large_until = 0;
}

static void free_entry(struct centry *e)
{
	mbfs_cache_free_kids(e);
	free(e->path);
	free(e);
}

struct mbfs_cache *mbfs_cache_new(uint64_t attr_ms, uint64_t dir_ms,
				  uint64_t neg_ms)
{
	struct mbfs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->nbuckets = 1024;
	c->tab = calloc(c->nbuckets, sizeof(*c->tab));
	c->changes = calloc(CACHE_CHANGES, sizeof(*c->changes));
	if (!c->tab || !c->changes) {
		free(c->tab);
		free(c->changes);
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	c->attr_ms = attr_ms;
	c->dir_ms = dir_ms;
	c->neg_ms = neg_ms;
	return c;
}

void mbfs_cache_clear(struct mbfs_cache *c)
{
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct centry *e = c->tab[i], *n;
		for (; e; e = n) {
			n = e->next;
			free_entry(e);
		}
		c->tab[i] = NULL;
	}
	c->count = 0;
}

void mbfs_cache_free(struct mbfs_cache *c)
{
	if (!c)
		return;
	mbfs_cache_clear(c);
	free(c->tab);
	for (size_t i = 0; i < CACHE_CHANGES; i++)
		free(c->changes[i].path);
	free(c->changes);
	pthread_cond_destroy(&c->loaded);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void mbfs_cache_bump_locked(struct mbfs_cache *c, const char *path)
{
	struct cache_change *ch = &c->changes[++c->counter % CACHE_CHANGES];
	free(ch->path);
	ch->path = path ? strdup(path) : NULL;
	ch->at = path && !ch->path ? 0 : c->counter;   /* no memory: all */
}

/* The length of the directory of p[0, n) (0 stands for "/"). */
static size_t up(const char *p, size_t n)
{
	while (n > 0 && p[--n] != '/')
		;
	return n;
}

/* Is p[0, n) the directory dir (dlen bytes)? */
static bool is_dir(const char *dir, size_t dlen, const char *p, size_t n)
{
	return n == 0 ? strcmp(dir, "/") == 0
		      : dlen == n && memcmp(dir, p, n) == 0;
}

/* Is dir the directory of p, or of p's directory (whose times a change of
 * p moves, as its listing shows them)? No copies: it runs for every
 * change since a listing's fetch, with the cache's lock held. */
static bool holds(const char *dir, size_t dlen, const char *p)
{
	size_t a = up(p, strlen(p));
	return is_dir(dir, dlen, p, a) || is_dir(dir, dlen, p, up(p, a));
}

bool mbfs_cache_changed_since_locked(struct mbfs_cache *c, const char *path,
				     uint64_t ctr)
{
	if (c->counter - ctr >= CACHE_CHANGES)
		return c->counter != ctr;
	size_t plen = strlen(path);
	for (uint64_t v = ctr + 1; v <= c->counter; v++) {
		const struct cache_change *ch = &c->changes[v % CACHE_CHANGES];
		if (ch->at != v || !ch->path || holds(path, plen, ch->path))
			return true;
		size_t n = strlen(ch->path);   /* path at or below it */
		if (strcmp(ch->path, "/") == 0 ||
		    (strncmp(path, ch->path, n) == 0 &&
		     (path[n] == '\0' || path[n] == '/')))
			return true;
	}
	return false;
}

static bool entry_live(const struct centry *e, uint64_t now)
{
	return e->attr_until > now || e->neg_until > now ||
	       e->dir_until > now || e->large_until > now;
}

/* Drop entries with nothing fresh left. Called with the lock held. */
static void sweep(struct mbfs_cache *c)
{
	uint64_t now = mb_now_ms();
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct centry **pp = &c->tab[i];
		while (*pp) {
			struct centry *e = *pp;
			if (!entry_live(e, now)) {
				*pp = e->next;
				free_entry(e);
				c->count--;
			} else {
				pp = &e->next;
			}
		}
	}
}

static void grow(struct mbfs_cache *c)
{
	size_t nb = c->nbuckets * 2;
	struct centry **t = calloc(nb, sizeof(*t));
	if (!t)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct centry *e = c->tab[i], *n;
		for (; e; e = n) {
			n = e->next;
			e->next = t[e->hash % nb];
			t[e->hash % nb] = e;
		}
	}
	free(c->tab);
	c->tab = t;
	c->nbuckets = nb;
}

struct centry *mbfs_cache_find(struct mbfs_cache *c, const char *path)
{
	uint64_t h = hash_path(path);
	for (struct centry *e = c->tab[h % c->nbuckets]; e; e = e->next)
		if (e->hash == h && strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

struct centry *mbfs_cache_add(struct mbfs_cache *c, const char *path)
{
	struct centry *e = mbfs_cache_find(c, path);
	if (e)
		return e;
	if (++c->puts % 4096 == 0)
		sweep(c);
	if (c->count >= c->nbuckets * 2)
		grow(c);
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->path = strdup(path);
	if (!e->path) {
		free(e);
		return NULL;
	}
	e->hash = hash_path(path);
	e->next = c->tab[e->hash % c->nbuckets];
	c->tab[e->hash % c->nbuckets] = e;
	c->count++;
	return e;
}

/* Add or replace a child in a listing, keeping it sorted. On failure the
 * listing is dropped (it would no longer be complete). */
void mbfs_cache_kid_put(struct centry *p, const char *name, const struct stat *st)
{
	struct child *k = mbfs_cache_kid(p, name);
	if (k) {
		k->st = *st;
		return;
	}
	char *copy = strdup(name);
	if (copy && p->nkids == p->capkids) {
		size_t cap = p->capkids ? 2 * p->capkids : 8;
		struct child *nk = realloc(p->kids, cap * sizeof(*nk));
		if (nk) {
			p->kids = nk;
			p->capkids = cap;
		}
	}
	if (!copy || p->nkids == p->capkids) {
		free(copy);
		mbfs_cache_free_kids(p);
		return;
	}
	size_t i = 0, hi = p->nkids;
	while (i < hi) {            /* first child sorting after name */
		size_t mid = i + (hi - i) / 2;
		if (strcmp(p->kids[mid].name, name) < 0)
			i = mid + 1;
		else
			hi = mid;
	}
	memmove(&p->kids[i + 1], &p->kids[i], (p->nkids - i) * sizeof(*p->kids));
	p->kids[i].name = copy;
	p->kids[i].st = *st;
	p->nkids++;
}

void mbfs_cache_kid_remove(struct centry *p, const char *name)
{
	struct child *k = mbfs_cache_kid(p, name);
	if (!k)
		return;
	size_t i = (size_t)(k - p->kids);
	free(k->name);
	memmove(&p->kids[i], &p->kids[i + 1], (p->nkids - i - 1) * sizeof(*p->kids));
	p->nkids--;
}


size_t mbfs_cache_kids_sort(struct child *kids, size_t n)
{
	qsort(kids, n, sizeof(*kids), kid_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && strcmp(kids[m - 1].name, kids[i].name) == 0) {
			free(kids[i].name);
			continue;
		}
		kids[m++] = kids[i];
	}
	return m;
}

/* ---- lookups and edits of one entry, for cache.c and cache_own.c ---- */

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

/* Would the kernel show b, which follows a, differently? A whole second
 * (the list route's) after a finer time in it (ours, or a guest
 * listing's) is the same time, and is shown as the finer one
 * (keep_finer_locked): the kernel need not ask again. The finer time after
 * the whole second is not: the kernel, which keeps a file's mtime itself
 * with a write-back cache, must learn it, or it drops the file's pages at
 * each look from then on. */
bool mbfs_cache_st_differs(const struct stat *a, const struct stat *b)
{
	long an = a->st_mtim.tv_nsec, bn = b->st_mtim.tv_nsec;
	return a->st_mode != b->st_mode || a->st_size != b->st_size ||
	       a->st_mtim.tv_sec != b->st_mtim.tv_sec ||
	       (bn && an != bn);
}

bool mbfs_cache_st_differs_exact(const struct stat *a, const struct stat *b,
				 bool exact)
{
	return mbfs_cache_st_differs(a, b) ||
	       (exact && a->st_mtim.tv_nsec != b->st_mtim.tv_nsec);
}

/* Look path up. 1 with *st (fresh attributes), -ENOENT (fresh negative, or
 * absent from a fresh parent listing), 0 when unknown. Lock held. */
/* A lookup of a name in dir was answered: dir is where a user works
 * (mbfs_cache_held_dirs). */
static void used_dir(struct mbfs_cache *c, const char *path, uint64_t now)
{
	char parent[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(parent))
		return;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (p && p->dir_until)
		p->used_ms = now;
}

int mbfs_cache_lookup_locked(struct mbfs_cache *c, const char *path,
			 struct stat *st)
{
	uint64_t now = mb_now_ms();
	struct centry *e = mbfs_cache_find(c, path);
	if (e && e->attr_until > now) {
		used_dir(c, path, now);
		*st = e->st;
		return 1;
	}
	if (e && e->neg_until > now) {
		used_dir(c, path, now);
		return -ENOENT;
	}
	if (strcmp(path, "/") == 0)
		return 0;
	char parent[MB_PATH_MAX];
	if (strlen(path) >= sizeof(parent))
		return 0;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (!p || p->dir_until <= now)
		return 0;
	p->used_ms = now;
	struct child *k = mbfs_cache_kid(p, strrchr(path, '/') + 1);
	if (!k)
		return -ENOENT;
	*st = k->st;
	return 1;
}

void mbfs_cache_put_attr_locked(struct mbfs_cache *c, const char *path,
			    const struct stat *st, bool exact)
{
	if (!c->attr_ms)
		return;
	struct centry *e = mbfs_cache_add(c, path);
	if (!e)
		return;
	if (e->attr_until && mbfs_cache_st_differs_exact(&e->st, st, exact))
		mbfs_kcache_stale(c->kc, path);
	e->st = *st;
	e->attr_until = mb_now_ms() + c->attr_ms;
	e->neg_until = 0;
}

void mbfs_cache_forget_locked(struct mbfs_cache *c, const char *path)
{
	struct centry *e = mbfs_cache_find(c, path);
	if (e) {
		e->attr_until = 0;
		e->neg_until = 0;
		mbfs_cache_free_kids(e);
	}
}

void mbfs_cache_forget_parent_locked(struct mbfs_cache *c, const char *path)
{
	char parent[MB_PATH_MAX];
	if (strcmp(path, "/") == 0 || strlen(path) >= sizeof(parent))
		return;
	mbfs_parent_path(path, parent);
	struct centry *p = mbfs_cache_find(c, parent);
	if (p)
		mbfs_cache_free_kids(p);
}
