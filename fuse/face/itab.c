/* itab.c: the kernel's inodes (itab.h): the table, names and paths, and
 * the moves a command made. Opens and nodes without a path are in
 * itab_open.c, the tree locks in itab_lock.c.
 *
 * Two hash tables over one set of nodes: by number, and by (parent
 * number, name). A node lives while the kernel counts lookups of it, an
 * fd holds it open, a request holds a tree lock on it, or a named child
 * hangs below it (its path goes through it). The root lives always.
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <fuse_lowlevel.h>

#include "common/util.h"
#include "fuse/face/itab.h"
#include "fuse/face/itab_int.h"

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static size_t id_slot(const struct mbfs_itab *t, uint64_t ino)
{
	return mix(ino) & (t->nbuckets - 1);
}

static size_t name_slot(const struct mbfs_itab *t, uint64_t parent,
			const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ mix(parent);
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return mix(h) & (t->nbuckets - 1);
}

struct mbfs_itab *mbfs_itab_new(void)
{
	struct mbfs_itab *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->nbuckets = 1024;
	t->by_id = calloc(t->nbuckets, sizeof(*t->by_id));
	t->by_name = calloc(t->nbuckets, sizeof(*t->by_name));
	if (!t->by_id || !t->by_name) {
		free(t->by_id);
		free(t->by_name);
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->tree, NULL);
	t->root.ino = FUSE_ROOT_ID;
	t->root.name = (char *)"";
	t->root.st.st_mode = S_IFDIR | 0755;
	t->next_ino = FUSE_ROOT_ID + 1;
	t->by_id[id_slot(t, FUSE_ROOT_ID)] = &t->root;
	t->count = 1;
	return t;
}

void mbfs_itab_free(struct mbfs_itab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct inode *n = t->by_id[i];
		while (n) {
			struct inode *next = n->id_next;
			free(n->fhs);
			if (n != &t->root) {
				free(n->name);
				free(n);
			}
			n = next;
		}
	}
	free(t->by_id);
	free(t->by_name);
	pthread_cond_destroy(&t->tree);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct inode *itab_get_locked(struct mbfs_itab *t, uint64_t ino)
{
	struct inode *n = t->by_id[id_slot(t, ino)];
	while (n && n->ino != ino)
		n = n->id_next;
	return n;
}

struct inode *itab_find_locked(struct mbfs_itab *t, uint64_t parent,
				 const char *name)
{
	struct inode *n = t->by_name[name_slot(t, parent, name)];
	while (n && !(n->parent && n->parent->ino == parent &&
		      strcmp(n->name, name) == 0))
		n = n->name_next;
	return n;
}

/* Doubles both tables when they hold more nodes than buckets; stays as
 * it is without memory (chains grow longer). */
static void grow_locked(struct mbfs_itab *t)
{
	if (t->count < t->nbuckets)
		return;
	size_t nb = t->nbuckets * 2;
	struct inode **ids = calloc(nb, sizeof(*ids));
	struct inode **names = calloc(nb, sizeof(*names));
	if (!ids || !names) {
		free(ids);
		free(names);
		return;
	}
	size_t old = t->nbuckets;
	struct inode **oids = t->by_id;
	struct inode **onames = t->by_name;
	t->nbuckets = nb;
	t->by_id = ids;
	t->by_name = names;
	for (size_t i = 0; i < old; i++) {
		for (struct inode *n = oids[i], *next; n; n = next) {
			next = n->id_next;
			size_t s = id_slot(t, n->ino);
			n->id_next = ids[s];
			ids[s] = n;
		}
		for (struct inode *n = onames[i], *next; n; n = next) {
			next = n->name_next;
			size_t s = name_slot(t, n->parent->ino, n->name);
			n->name_next = names[s];
			names[s] = n;
		}
	}
	free(oids);
	free(onames);
}

static void unhash_id_locked(struct mbfs_itab *t, struct inode *n)
{
	struct inode **pp = &t->by_id[id_slot(t, n->ino)];
	while (*pp && *pp != n)
		pp = &(*pp)->id_next;
	if (*pp)
		*pp = n->id_next;
}

/* n loses its name: out of the name table, its parent's child no more. */
void itab_unname_locked(struct mbfs_itab *t, struct inode *n)
{
	if (!n->parent)
		return;
	struct inode **pp = &t->by_name[name_slot(t, n->parent->ino, n->name)];
	while (*pp && *pp != n)
		pp = &(*pp)->name_next;
	if (*pp)
		*pp = n->name_next;
	struct inode *parent = n->parent;
	free(n->name);
	n->name = NULL;
	n->parent = NULL;
	n->name_next = NULL;
	parent->children--;
	itab_maybe_free_locked(t, parent);
}

/* n takes the name parent/name (a copy; n has none). */
static void name_locked(struct mbfs_itab *t, struct inode *n,
			struct inode *parent, char *name)
{
	n->parent = parent;
	n->name = name;
	parent->children++;
	size_t s = name_slot(t, parent->ino, name);
	n->name_next = t->by_name[s];
	t->by_name[s] = n;
}

void itab_maybe_free_locked(struct mbfs_itab *t, struct inode *n)
{
	if (n == &t->root || n->nlookup || n->open || n->children ||
	    n->treelock || n->wwait)
		return;
	itab_unname_locked(t, n);
	unhash_id_locked(t, n);
	t->count--;
	free(n->fhs);
	free(n);
}

/* A new node named parent/name, with a number never given before; NULL
 * without memory. */
static struct inode *new_child_locked(struct mbfs_itab *t, struct inode *parent,
				      const char *name)
{
	char *copy = strdup(name);
	struct inode *n = copy ? calloc(1, sizeof(*n)) : NULL;
	if (!n) {
		free(copy);
		return NULL;
	}
	n->ino = t->next_ino++;
	size_t s = id_slot(t, n->ino);
	n->id_next = t->by_id[s];
	t->by_id[s] = n;
	t->count++;
	name_locked(t, n, parent, copy);
	grow_locked(t);
	return n;
}

int mbfs_itab_path(struct mbfs_itab *t, uint64_t ino, const char *name,
		   char *buf)
{
	char *end = buf + MB_PATH_MAX - 1;
	char *s = end;
	*s = '\0';
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	const char *part = name;
	if (!n)
		rc = -ESTALE;
	for (; !rc; n = n->parent) {
		if (part) {
			size_t len = strlen(part);
			if ((size_t)(s - buf) < len + 1) {
				rc = -ENAMETOOLONG;
				break;
			}
			s -= len;
			memcpy(s, part, len);
			*--s = '/';
		}
		if (n == &t->root)
			break;
		if (!n->parent) {
			rc = -ESTALE;
			break;
		}
		part = n->name;
	}
	pthread_mutex_unlock(&t->lock);
	if (rc)
		return rc;
	if (s == end)
		*--s = '/';
	memmove(buf, s, (size_t)(end - s) + 1);
	return 0;
}

uint64_t mbfs_itab_parent(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	uint64_t p = !n ? 0 : n == &t->root ? ino : n->parent ? n->parent->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return p;
}

/* auto_cache: pages kept across opens go stale when the size or the
 * modification time change. */
void itab_note_stat_locked(struct inode *n, const struct stat *st)
{
	if (n->cache_valid && (n->st.st_size != st->st_size ||
			       n->st.st_mtim.tv_sec != st->st_mtim.tv_sec ||
			       n->st.st_mtim.tv_nsec != st->st_mtim.tv_nsec))
		n->cache_valid = false;
	n->st = *st;
	n->st_ms = mb_now_ms();
}

uint64_t mbfs_itab_looked_up(struct mbfs_itab *t, uint64_t parent,
			     const char *name, const struct stat *st)
{
	uint64_t ino = 0;
	pthread_mutex_lock(&t->lock);
	struct inode *n = name ? itab_find_locked(t, parent, name) : itab_get_locked(t, parent);
	if (!n && name) {
		struct inode *p = itab_get_locked(t, parent);
		n = p ? new_child_locked(t, p, name) : NULL;
	}
	if (n) {
		n->nlookup++;
		itab_note_stat_locked(n, st);
		ino = n->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void mbfs_itab_forget(struct mbfs_itab *t, uint64_t ino, uint64_t count)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	if (n && n != &t->root) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		itab_maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t mbfs_itab_find(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_find_locked(t, parent, name);
	uint64_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

uint64_t mbfs_itab_find_path(struct mbfs_itab *t, const char *path)
{
	char name[256];
	pthread_mutex_lock(&t->lock);
	struct inode *n = &t->root;
	for (const char *p = path; n && *p;) {
		while (*p == '/')
			p++;
		size_t len = strcspn(p, "/");
		if (!len)
			break;
		if (len >= sizeof(name)) {
			n = NULL;
			break;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		n = itab_find_locked(t, n->ino, name);
		p += len;
	}
	uint64_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

bool mbfs_itab_is_open(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_find_locked(t, parent, name);
	bool open = n && n->open > 0;
	pthread_mutex_unlock(&t->lock);
	return open;
}

void mbfs_itab_rename(struct mbfs_itab *t, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname, bool hidden)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_find_locked(t, parent, name);
	struct inode *np = itab_get_locked(t, newparent);
	struct inode *old = itab_find_locked(t, newparent, newname);
	if (old && old != n)
		itab_unname_locked(t, old);
	if (n && n != old) {
		char *copy = strdup(newname);
		/* a child named first: the old parent may go with unname */
		if (np)
			np->children++;
		itab_unname_locked(t, n);
		if (np && copy) {
			name_locked(t, n, np, copy);
			n->hidden = hidden;
		} else {
			free(copy);
		}
		if (np) {
			np->children--;
			itab_maybe_free_locked(t, np);
		}
		itab_maybe_free_locked(t, n);
	}
	if (old && old != n)
		itab_maybe_free_locked(t, old);
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_exchange(struct mbfs_itab *t, uint64_t p1, const char *n1,
			uint64_t p2, const char *n2)
{
	pthread_mutex_lock(&t->lock);
	struct inode *a = itab_find_locked(t, p1, n1);
	struct inode *b = itab_find_locked(t, p2, n2);
	struct inode *pa = itab_get_locked(t, p1);
	struct inode *pb = itab_get_locked(t, p2);
	char *ca = strdup(n2), *cb = strdup(n1);
	if (pa && pb && ca && cb) {
		pa->children++;   /* kept while their children move */
		pb->children++;
		if (a)
			itab_unname_locked(t, a);
		if (b)
			itab_unname_locked(t, b);
		if (a) {
			name_locked(t, a, pb, ca);
			ca = NULL;
		}
		if (b) {
			name_locked(t, b, pa, cb);
			cb = NULL;
		}
		pa->children--;
		pb->children--;
		itab_maybe_free_locked(t, pa);
		if (pb != pa)
			itab_maybe_free_locked(t, pb);
	} else {
		/* without memory: both names go, looked up again */
		if (a)
			itab_unname_locked(t, a);
		if (b)
			itab_unname_locked(t, b);
	}
	if (a)
		itab_maybe_free_locked(t, a);
	if (b)
		itab_maybe_free_locked(t, b);
	free(ca);
	free(cb);
	pthread_mutex_unlock(&t->lock);
}

/* The node of path and, in *dir and *name, its directory's node and its
 * last component (a pointer into path); NULL when the kernel holds none. */
static struct inode *find_path_locked(struct mbfs_itab *t, const char *path,
				      struct inode **dir, const char **name)
{
	char part[256];
	struct inode *n = &t->root, *up = NULL;
	const char *last = "";
	for (const char *p = path; n && *p;) {
		while (*p == '/')
			p++;
		size_t len = strcspn(p, "/");
		if (!len)
			break;
		if (len >= sizeof(part))
			return NULL;
		memcpy(part, p, len);
		part[len] = '\0';
		up = n;
		last = p;
		n = itab_find_locked(t, n->ino, part);
		p += len;
		if (!n && p[strspn(p, "/")])
			up = NULL;   /* a directory on the way is not known */
	}
	if (dir)
		*dir = up;
	if (name)
		*name = last;
	return n;
}

/* The directory of path, with a node made for each directory on the
 * way the kernel does not hold (forgotten since, or never looked up): its
 * first lookup then gets that node's number. *name: path's last
 * component. NULL without memory. */
static struct inode *dirs_locked(struct mbfs_itab *t, const char *path,
				 const char **name)
{
	char part[256];
	struct inode *n = &t->root;
	const char *p = path;
	for (;;) {
		while (*p == '/')
			p++;
		size_t len = strcspn(p, "/");
		if (!len || !p[len + strspn(p + len, "/")]) {
			*name = p;
			return len ? n : NULL;
		}
		if (len >= sizeof(part))
			return NULL;
		memcpy(part, p, len);
		part[len] = '\0';
		struct inode *c = itab_find_locked(t, n->ino, part);
		if (!c && !(c = new_child_locked(t, n, part)))
			return NULL;
		if (!c->nlookup && !c->st.st_mode)   /* not the kernel's yet */
			c->st.st_mode = S_IFDIR | 0755;
		n = c;
		p += len;
	}
}

void mbfs_itab_moved(struct mbfs_itab *t, const char *const *from,
		     const char *const *to, size_t k)
{
	struct inode **v = calloc(k ? k : 1, sizeof(*v));
	if (!v)
		return;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < k; i++) {
		v[i] = find_path_locked(t, from[i], NULL, NULL);
		if (v[i] == &t->root)
			v[i] = NULL;
		for (size_t j = 0; j < i && v[i]; j++)
			if (v[j] == v[i])
				v[i] = NULL;
		if (v[i]) {   /* kept while nameless (nlookup may be 0) */
			v[i]->children++;
			itab_unname_locked(t, v[i]);
		}
	}
	for (size_t i = 0; i < k; i++) {
		struct inode *dir = NULL;
		const char *name = NULL;
		if (!to[i] || !v[i])
			continue;
		struct inode *old = find_path_locked(t, to[i], &dir, &name);
		if (!dir)
			dir = dirs_locked(t, to[i], &name);
		if (!dir)   /* without memory: it stays nameless */
			continue;
		if (old && old != v[i]) {
			itab_unname_locked(t, old);
			itab_maybe_free_locked(t, old);
		}
		char *copy = strdup(name);
		if (copy)
			name_locked(t, v[i], dir, copy);
		else   /* a directory made for it goes */
			itab_maybe_free_locked(t, dir);
	}
	for (size_t i = 0; i < k; i++)
		if (v[i]) {
			v[i]->children--;
			itab_maybe_free_locked(t, v[i]);
		}
	pthread_mutex_unlock(&t->lock);
	free(v);
}

void mbfs_itab_remove(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_find_locked(t, parent, name);
	if (n) {
		itab_unname_locked(t, n);
		itab_maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}
