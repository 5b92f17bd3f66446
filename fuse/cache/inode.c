/* inode.c: inode numbers that survive renames (see inode.h).
 *
 * A path's identity is a string hashed into its number: its own path, or,
 * through the longest alias that is a prefix of it (at a '/'), the alias's
 * identity followed by the rest of the path. An identity is either a mount
 * path the file once had or "//N" for a fresh one; "//" never occurs in a
 * real path, so a fresh identity cannot meet a natural one. Three maps:
 * alias key -> identity, identity -> key (who holds an identity), and
 * directory -> number of aliases below it (so that renaming or removing a
 * file, the common case, needs no scan of the table).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/cache/inode.h"
#include "fuse/mbfs.h"

struct ent {
	struct ent *next;
	uint64_t h;
	char *s;        /* the key, owned */
	char *v;        /* the value, owned (NULL in the count map) */
	long n;         /* the count map: aliases below the directory s */
};

struct map {
	struct ent **b;
	size_t nb, count;
};

struct mbfs_inos {
	pthread_mutex_t lock;
	struct map bykey;       /* alias path -> identity */
	struct map byid;        /* identity -> alias path */
	struct map below;       /* directory -> aliases strictly below it */
	atomic_size_t live;     /* bykey.count, read without the lock */
	uint64_t fresh;         /* the last N of "//N" */
};

static uint64_t hash_n(const char *s, size_t n)
{
	uint64_t h = MBFS_FNV_OFFSET;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static int map_init(struct map *m)
{
	m->nb = 64;
	m->count = 0;
	m->b = calloc(m->nb, sizeof(*m->b));
	return m->b ? 0 : -ENOMEM;
}

static void map_release(struct map *m)
{
	for (size_t i = 0; m->b && i < m->nb; i++) {
		for (struct ent *e = m->b[i], *nx; e; e = nx) {
			nx = e->next;
			free(e->s);
			free(e->v);
			free(e);
		}
	}
	free(m->b);
	m->b = NULL;
}

/* The entry whose key is the n bytes at s, or NULL. */
static struct ent *map_find(const struct map *m, const char *s, size_t n)
{
	uint64_t h = hash_n(s, n);
	for (struct ent *e = m->b[h % m->nb]; e; e = e->next)
		if (e->h == h && strncmp(e->s, s, n) == 0 && e->s[n] == '\0')
			return e;
	return NULL;
}

static void map_grow(struct map *m)
{
	size_t nb = m->nb * 2;
	struct ent **b = calloc(nb, sizeof(*b));
	if (!b)
		return;   /* longer chains, still correct */
	for (size_t i = 0; i < m->nb; i++) {
		for (struct ent *e = m->b[i], *nx; e; e = nx) {
			nx = e->next;
			e->next = b[e->h % nb];
			b[e->h % nb] = e;
		}
	}
	free(m->b);
	m->b = b;
	m->nb = nb;
}

/* Add key s (n bytes) with value v (copied unless NULL). NULL without
 * memory. The key must not be there yet. */
static struct ent *map_add(struct map *m, const char *s, size_t n,
			   const char *v)
{
	struct ent *e = calloc(1, sizeof(*e));
	if (!e || !(e->s = strndup(s, n)) || (v && !(e->v = strdup(v)))) {
		if (e)
			free(e->s);
		free(e);
		return NULL;
	}
	if (m->count >= 2 * m->nb)
		map_grow(m);
	e->h = hash_n(s, n);
	e->next = m->b[e->h % m->nb];
	m->b[e->h % m->nb] = e;
	m->count++;
	return e;
}

static void map_del(struct map *m, struct ent *x)
{
	for (struct ent **pp = &m->b[x->h % m->nb]; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			m->count--;
			free(x->s);
			free(x->v);
			free(x);
			return;
		}
	}
}

struct mbfs_inos *mbfs_inos_new(void)
{
	struct mbfs_inos *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	atomic_init(&t->live, 0);
	if (map_init(&t->bykey) || map_init(&t->byid) || map_init(&t->below)) {
		mbfs_inos_free(t);
		return NULL;
	}
	return t;
}

void mbfs_inos_free(struct mbfs_inos *t)
{
	if (!t)
		return;
	map_release(&t->bykey);
	map_release(&t->byid);
	map_release(&t->below);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Count (+1/-1) an alias at key in every directory above it. */
static void count_below(struct mbfs_inos *t, const char *key, long d)
{
	for (const char *p = strchr(key + 1, '/'); p; p = strchr(p + 1, '/')) {
		size_t n = (size_t)(p - key);
		struct ent *e = map_find(&t->below, key, n);
		if (!e && d > 0)
			e = map_add(&t->below, key, n, NULL);
		if (!e)
			continue;
		e->n += d;
		if (e->n <= 0)
			map_del(&t->below, e);
	}
}

/* key now carries ident. Lock held. 0 or -ENOMEM. */
static int alias_add(struct mbfs_inos *t, const char *key, const char *ident)
{
	struct ent *k = map_add(&t->bykey, key, strlen(key), ident);
	if (!k)
		return -ENOMEM;
	if (!map_add(&t->byid, ident, strlen(ident), key)) {
		map_del(&t->bykey, k);
		return -ENOMEM;
	}
	count_below(t, key, 1);
	atomic_store(&t->live, t->bykey.count);
	return 0;
}

/* Forget the alias k. Lock held. */
static void alias_del(struct mbfs_inos *t, struct ent *k)
{
	struct ent *i = map_find(&t->byid, k->v, strlen(k->v));
	if (i)
		map_del(&t->byid, i);
	count_below(t, k->s, -1);
	map_del(&t->bykey, k);
	atomic_store(&t->live, t->bykey.count);
}

/* The aliases at or below path (below: only when some exist), into a
 * malloc'd array of their keys (*n of them); NULL when none. Lock held. */
static char **aliases_under(struct mbfs_inos *t, const char *path, size_t *n)
{
	size_t pl = strlen(path), cnt = 0, cap = 0;
	char **v = NULL;
	struct ent *self = map_find(&t->bykey, path, pl);
	struct ent *d = map_find(&t->below, path, pl);
	*n = 0;
	if (!self && !d)
		return NULL;
	for (size_t i = 0; i < t->bykey.nb; i++) {
		for (struct ent *e = t->bykey.b[i]; e; e = e->next) {
			bool under = e == self || (d && strncmp(e->s, path, pl) == 0 &&
						   e->s[pl] == '/');
			if (!under)
				continue;
			if (cnt == cap) {
				cap = cap ? 2 * cap : 4;
				char **nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					goto out;
				v = nv;
			}
			if (!(v[cnt] = strdup(e->s)))
				goto out;
			cnt++;
		}
	}
out:
	*n = cnt;
	return v;
}

static void free_keys(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The identity of path into out (MB_PATH_MAX), making one fresh for each
 * component whose identity another alias holds (that file was renamed
 * away: this one is new). Lock held. */
static void identity(struct mbfs_inos *t, const char *path, char *out)
{
	size_t len = 0;
	out[0] = '\0';
	for (const char *p = path; *p == '/';) {
		const char *end = strchr(p + 1, '/');
		size_t pl = end ? (size_t)(end - path) : strlen(path);
		struct ent *k = map_find(&t->bykey, path, pl);
		if (k) {
			len = (size_t)snprintf(out, MB_PATH_MAX, "%s", k->v);
		} else {
			len += (size_t)snprintf(out + len, MB_PATH_MAX - len,
						"%.*s", (int)(path + pl - p), p);
			struct ent *holder = map_find(&t->byid, out, strlen(out));
			if (holder) {
				char fresh[32];
				snprintf(fresh, sizeof(fresh), "//%llu",
					 (unsigned long long)++t->fresh);
				char key[MB_PATH_MAX];
				snprintf(key, sizeof(key), "%.*s", (int)pl, path);
				if (alias_add(t, key, fresh) == 0)
					len = (size_t)snprintf(out, MB_PATH_MAX,
							       "%s", fresh);
			}
		}
		if (len >= MB_PATH_MAX)
			len = MB_PATH_MAX - 1;
		p = path + pl;
	}
}

uint64_t mbfs_ino(const struct mbfs *fs, const char *path)
{
	if (strcmp(path, "/") == 0)
		return 1;
	uint64_t h = mbfs_fnv1a(MBFS_FNV_OFFSET, fs->root);
	struct mbfs_inos *t = fs->inos;
	if (!t || atomic_load(&t->live) == 0) {
		h = mbfs_fnv1a(h, path);
	} else {
		char id[MB_PATH_MAX];
		pthread_mutex_lock(&t->lock);
		identity(t, path, id);
		pthread_mutex_unlock(&t->lock);
		h = mbfs_fnv1a(h, id);
	}
	return h > 1 ? h : h + 2;
}

void mbfs_ino_renamed(struct mbfs *fs, const char *from, const char *to)
{
	struct mbfs_inos *t = fs->inos;
	if (!t || strcmp(from, to) == 0 || strcmp(from, "/") == 0)
		return;
	char id[MB_PATH_MAX];
	size_t fl = strlen(from), n;
	pthread_mutex_lock(&t->lock);
	identity(t, from, id);
	/* what to held is replaced */
	char **gone = aliases_under(t, to, &n);
	for (size_t i = 0; i < n; i++) {
		struct ent *k = map_find(&t->bykey, gone[i], strlen(gone[i]));
		if (k)
			alias_del(t, k);
	}
	free_keys(gone, n);
	/* aliases inside a renamed directory move with it */
	char **moved = aliases_under(t, from, &n);
	for (size_t i = 0; i < n; i++) {
		struct ent *k = map_find(&t->bykey, moved[i], strlen(moved[i]));
		char key[MB_PATH_MAX], ident[MB_PATH_MAX];
		if (!k)
			continue;
		snprintf(ident, sizeof(ident), "%s", k->v);
		alias_del(t, k);
		if (strlen(moved[i]) > fl &&
		    snprintf(key, sizeof(key), "%s%s", to, moved[i] + fl) <
		    (int)sizeof(key))
			alias_add(t, key, ident);
	}
	free_keys(moved, n);
	/* renamed back to its own path: no alias needed */
	if (strcmp(id, to) != 0)
		alias_add(t, to, id);
	pthread_mutex_unlock(&t->lock);
}

void mbfs_ino_removed(struct mbfs *fs, const char *path)
{
	struct mbfs_inos *t = fs->inos;
	if (!t || atomic_load(&t->live) == 0)
		return;
	size_t n;
	pthread_mutex_lock(&t->lock);
	char **gone = aliases_under(t, path, &n);
	for (size_t i = 0; i < n; i++) {
		struct ent *k = map_find(&t->bykey, gone[i], strlen(gone[i]));
		if (k)
			alias_del(t, k);
	}
	free_keys(gone, n);
	pthread_mutex_unlock(&t->lock);
}
