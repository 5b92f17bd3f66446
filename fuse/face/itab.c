/* itab.c: the kernel's inodes (itab.h).
 *
 * Two hash tables over one set of nodes: by number, and by (parent
 * number, name). A node lives while the kernel counts lookups of it, an
 * fd holds it open, or a named child hangs below it (its path goes
 * through it). The root lives always.
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <fuse_lowlevel.h>

#include "common/util.h"
#include "fuse/face/itab.h"

struct inode {
	uint64_t ino;
	struct inode *parent;   /* NULL when nameless (and for the root) */
	char *name;             /* NULL when nameless; "" for the root */
	uint64_t nlookup;
	unsigned open;
	unsigned children;      /* named children */
	bool hidden;
	bool cache_valid;       /* auto_cache: pages kept since the last open */
	bool own_mode, own_atime, own_mtime;   /* set while it had no path:
	                           kept over what its open copy says */
	int treelock;           /* requests whose path goes through it (> 0),
	                           or -1: its name is being changed */
	unsigned wwait;         /* requests waiting to change its name */
	uint64_t *fhs;          /* the handles open on it */
	unsigned nfhs;
	struct stat st;         /* the last attributes told */
	uint64_t st_ms;         /* when */
	struct inode *id_next;
	struct inode *name_next;
};

struct mbfs_itab {
	pthread_mutex_t lock;
	pthread_cond_t tree;    /* a tree lock was let go */
	struct inode **by_id;
	struct inode **by_name;
	size_t nbuckets;        /* of each, a power of two */
	size_t count;
	uint64_t next_ino;
	struct inode root;
};

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

static struct inode *get_locked(struct mbfs_itab *t, uint64_t ino)
{
	struct inode *n = t->by_id[id_slot(t, ino)];
	while (n && n->ino != ino)
		n = n->id_next;
	return n;
}

static struct inode *find_locked(struct mbfs_itab *t, uint64_t parent,
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

static void maybe_free_locked(struct mbfs_itab *t, struct inode *n);

/* n loses its name: out of the name table, its parent's child no more. */
static void unname_locked(struct mbfs_itab *t, struct inode *n)
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
	maybe_free_locked(t, parent);
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

static void maybe_free_locked(struct mbfs_itab *t, struct inode *n)
{
	if (n == &t->root || n->nlookup || n->open || n->children ||
	    n->treelock || n->wwait)
		return;
	unname_locked(t, n);
	unhash_id_locked(t, n);
	t->count--;
	free(n->fhs);
	free(n);
}

int mbfs_itab_path(struct mbfs_itab *t, uint64_t ino, const char *name,
		   char *buf)
{
	char *end = buf + MB_PATH_MAX - 1;
	char *s = end;
	*s = '\0';
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
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
	struct inode *n = get_locked(t, ino);
	uint64_t p = !n ? 0 : n == &t->root ? ino : n->parent ? n->parent->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return p;
}

/* auto_cache: pages kept across opens go stale when the size or the
 * modification time change. */
static void note_stat_locked(struct inode *n, const struct stat *st)
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
	struct inode *n = name ? find_locked(t, parent, name) : get_locked(t, parent);
	if (!n && name) {
		struct inode *p = get_locked(t, parent);
		char *copy = p ? strdup(name) : NULL;
		n = copy ? calloc(1, sizeof(*n)) : NULL;
		if (n) {
			n->ino = t->next_ino++;
			size_t s = id_slot(t, n->ino);
			n->id_next = t->by_id[s];
			t->by_id[s] = n;
			t->count++;
			name_locked(t, n, p, copy);
			grow_locked(t);
		} else {
			free(copy);
		}
	}
	if (n) {
		n->nlookup++;
		note_stat_locked(n, st);
		ino = n->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void mbfs_itab_forget(struct mbfs_itab *t, uint64_t ino, uint64_t count)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (n && n != &t->root) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t mbfs_itab_find(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = find_locked(t, parent, name);
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
		n = find_locked(t, n->ino, name);
		p += len;
	}
	uint64_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

bool mbfs_itab_is_open(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = find_locked(t, parent, name);
	bool open = n && n->open > 0;
	pthread_mutex_unlock(&t->lock);
	return open;
}

void mbfs_itab_rename(struct mbfs_itab *t, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname, bool hidden)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = find_locked(t, parent, name);
	struct inode *np = get_locked(t, newparent);
	struct inode *old = find_locked(t, newparent, newname);
	if (old && old != n)
		unname_locked(t, old);
	if (n && n != old) {
		char *copy = strdup(newname);
		/* a child named first: the old parent may go with unname */
		if (np)
			np->children++;
		unname_locked(t, n);
		if (np && copy) {
			name_locked(t, n, np, copy);
			n->hidden = hidden;
		} else {
			free(copy);
		}
		if (np) {
			np->children--;
			maybe_free_locked(t, np);
		}
		maybe_free_locked(t, n);
	}
	if (old && old != n)
		maybe_free_locked(t, old);
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_exchange(struct mbfs_itab *t, uint64_t p1, const char *n1,
			uint64_t p2, const char *n2)
{
	pthread_mutex_lock(&t->lock);
	struct inode *a = find_locked(t, p1, n1);
	struct inode *b = find_locked(t, p2, n2);
	struct inode *pa = get_locked(t, p1);
	struct inode *pb = get_locked(t, p2);
	char *ca = strdup(n2), *cb = strdup(n1);
	if (pa && pb && ca && cb) {
		pa->children++;   /* kept while their children move */
		pb->children++;
		if (a)
			unname_locked(t, a);
		if (b)
			unname_locked(t, b);
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
		maybe_free_locked(t, pa);
		if (pb != pa)
			maybe_free_locked(t, pb);
	} else {
		/* without memory: both names go, looked up again */
		if (a)
			unname_locked(t, a);
		if (b)
			unname_locked(t, b);
	}
	if (a)
		maybe_free_locked(t, a);
	if (b)
		maybe_free_locked(t, b);
	free(ca);
	free(cb);
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_remove(struct mbfs_itab *t, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = find_locked(t, parent, name);
	if (n) {
		unname_locked(t, n);
		maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_set_stat(struct mbfs_itab *t, uint64_t ino, const struct stat *st)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (n)
		note_stat_locked(n, st);
	pthread_mutex_unlock(&t->lock);
}

/* What a node without a path shows: its last attributes, no links. */
static void gone_copy_locked(const struct inode *n, struct stat *st)
{
	*st = n->st;
	st->st_nlink = 0;
	if (S_ISDIR(st->st_mode))
		st->st_size = 0;   /* as rmdir leaves it */
}

/* n has a path: every node up to the root has a name. */
static bool named_locked(struct mbfs_itab *t, const struct inode *n)
{
	for (; n != &t->root; n = n->parent)
		if (!n->parent)
			return false;
	return true;
}

int mbfs_itab_gone_stat(struct mbfs_itab *t, uint64_t ino, struct stat *st)
{
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (!n) {
		rc = -ESTALE;
	} else if (!named_locked(t, n)) {
		gone_copy_locked(n, st);
		rc = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void mbfs_itab_gone_setattr(struct mbfs_itab *t, uint64_t ino,
			    const struct stat *attr, int mask, struct stat *st)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (n) {
		if (mask & FUSE_SET_ATTR_MODE) {
			n->st.st_mode = (n->st.st_mode & S_IFMT) |
					(attr->st_mode & 07777);
			n->own_mode = true;
		}
		if (mask & FUSE_SET_ATTR_ATIME) {
			n->st.st_atim = (mask & FUSE_SET_ATTR_ATIME_NOW) ? now
					: attr->st_atim;
			n->own_atime = true;
		}
		if (mask & FUSE_SET_ATTR_MTIME) {
			n->st.st_mtim = (mask & FUSE_SET_ATTR_MTIME_NOW) ? now
					: attr->st_mtim;
			n->own_mtime = true;
		}
		n->st.st_ctim = now;
		gone_copy_locked(n, st);
	}
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_gone_overlay(struct mbfs_itab *t, uint64_t ino, struct stat *st)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	/* a change of size sets the times anew, as on a local disk */
	if (n && (n->own_atime || n->own_mtime) && st->st_size != n->st.st_size)
		n->own_atime = n->own_mtime = false;
	if (n && n->own_mode)
		st->st_mode = (st->st_mode & S_IFMT) | (n->st.st_mode & 07777);
	if (n && n->own_atime)
		st->st_atim = n->st.st_atim;
	if (n && n->own_mtime)
		st->st_mtim = n->st.st_mtim;
	pthread_mutex_unlock(&t->lock);
}

void mbfs_itab_unname(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (n && n != &t->root) {
		unname_locked(t, n);
		maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

bool mbfs_itab_hidden(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	bool h = n && n->hidden;
	pthread_mutex_unlock(&t->lock);
	return h;
}

int mbfs_itab_cache_age(struct mbfs_itab *t, uint64_t ino, uint64_t max_ms)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	int rc = n && n->cache_valid && mb_now_ms() - n->st_ms > max_ms ? 2 : 0;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

bool mbfs_itab_opened(struct mbfs_itab *t, uint64_t ino, uint64_t fh,
		      bool cache)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	bool keep = false;
	if (n) {
		n->open++;
		uint64_t *v = realloc(n->fhs, (n->nfhs + 1) * sizeof(*v));
		if (v) {   /* without memory, it is just not lent */
			n->fhs = v;
			v[n->nfhs++] = fh;
		}
		if (cache) {
			keep = n->cache_valid;
			n->cache_valid = true;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return keep;
}

void mbfs_itab_cache_drop(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	if (n)
		n->cache_valid = false;
	pthread_mutex_unlock(&t->lock);
}

bool mbfs_itab_closing(struct mbfs_itab *t, uint64_t ino, uint64_t fh)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	for (unsigned i = 0; n && i < n->nfhs; i++)
		if (n->fhs[i] == fh) {
			n->fhs[i] = n->fhs[--n->nfhs];
			break;
		}
	pthread_mutex_unlock(&t->lock);
	return n != NULL;
}

bool mbfs_itab_lend_fh(struct mbfs_itab *t, uint64_t ino,
		       bool (*hold)(uint64_t fh), uint64_t *fh)
{
	bool lent = false;
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	for (unsigned i = 0; n && !lent && i < n->nfhs; i++)
		if (hold(n->fhs[i])) {
			*fh = n->fhs[i];
			lent = true;
		}
	pthread_mutex_unlock(&t->lock);
	return lent;
}

bool mbfs_itab_closed(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = get_locked(t, ino);
	bool last_hidden = false;
	if (n && n->open) {
		n->open--;
		if (!n->open && n->hidden) {
			n->hidden = false;
			last_hidden = true;
		}
		/* a hidden node keeps its name until the caller removed it */
		if (!last_hidden)
			maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
	return last_hidden;
}

/* The tree locks (itab.h). A request's set is taken whole or not at all,
 * so two requests never wait for each other. */

/* Can the read chain from n (n and every node above it) be taken? A
 * request that changes no name also waits for one that waits to. */
static bool chain_free_locked(struct mbfs_itab *t, struct inode *n,
			      bool writer)
{
	for (; n; n = n == &t->root ? NULL : n->parent)
		if (n->treelock < 0 || (!writer && n->wwait))
			return false;
	return true;
}

static bool on_chain_locked(struct mbfs_itab *t, struct inode *n,
			    const struct inode *w)
{
	for (; n; n = n == &t->root ? NULL : n->parent)
		if (n == w)
			return true;
	return false;
}

/* Take the read chain from n: each node counted once more and noted in
 * l's chain (room made by the caller). */
static void chain_take_locked(struct mbfs_itab *t, struct inode *n,
			      struct mbfs_itab_locks *l)
{
	for (; n; n = n == &t->root ? NULL : n->parent) {
		n->treelock++;
		l->chain[l->nchain++] = n->ino;
	}
}

static size_t chain_len_locked(struct mbfs_itab *t, struct inode *n)
{
	size_t k = 0;
	for (; n; n = n == &t->root ? NULL : n->parent)
		k++;
	return k;
}

int mbfs_itab_lock(struct mbfs_itab *t, struct mbfs_itab_locks *l)
{
	struct inode *waiting[2] = { NULL, NULL };
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct inode *r[2], *w[2];
		bool writer = false, ok = true;
		for (int i = 0; i < 2; i++) {
			r[i] = l->read[i] ? get_locked(t, l->read[i]) : NULL;
			if (l->read[i] && !r[i])
				rc = -ESTALE;
			w[i] = l->wname[i] ? find_locked(t, l->wdir[i], l->wname[i])
					   : NULL;
		}
		if (rc)
			break;
		if (w[1] == w[0])
			w[1] = NULL;
		for (int i = 0; i < 2; i++) {
			/* a name above one of its own paths: the operation
			 * fails on its own (the kernel checks that too) */
			if (w[i] && (on_chain_locked(t, r[0], w[i]) ||
				     on_chain_locked(t, r[1], w[i])))
				w[i] = NULL;
			writer |= w[i] != NULL;
		}
		for (int i = 0; i < 2; i++) {
			ok &= chain_free_locked(t, r[i], writer);
			ok &= !w[i] || w[i]->treelock == 0;
		}
		for (int i = 0; i < 2; i++) {   /* marks of the last round */
			if (waiting[i])
				waiting[i]->wwait--;
			waiting[i] = NULL;
		}
		size_t need = ok ? chain_len_locked(t, r[0]) +
				   chain_len_locked(t, r[1]) : 0;
		l->chain = l->inl;
		l->nchain = 0;
		if (need > sizeof(l->inl) / sizeof(l->inl[0]) &&
		    !(l->chain = malloc(need * sizeof(*l->chain)))) {
			rc = -ENOMEM;
			ok = false;
		}
		if (ok) {
			for (int i = 0; i < 2; i++) {
				chain_take_locked(t, r[i], l);
				if (w[i])
					w[i]->treelock = -1;
				l->wino[i] = w[i] ? w[i]->ino : 0;
			}
			break;
		}
		if (rc)
			break;
		for (int i = 0; i < 2; i++)
			if (w[i] && w[i]->treelock != 0) {
				w[i]->wwait++;
				waiting[i] = w[i];
			}
		pthread_cond_wait(&t->tree, &t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void mbfs_itab_unlock(struct mbfs_itab *t, struct mbfs_itab_locks *l)
{
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < 2; i++) {
		struct inode *w = l->wino[i] ? get_locked(t, l->wino[i]) : NULL;
		if (w) {
			w->treelock = 0;
			maybe_free_locked(t, w);
		}
	}
	for (size_t i = 0; i < l->nchain; i++) {
		struct inode *n = get_locked(t, l->chain[i]);
		if (n) {
			n->treelock--;
			maybe_free_locked(t, n);
		}
	}
	pthread_cond_broadcast(&t->tree);
	pthread_mutex_unlock(&t->lock);
	if (l->chain && l->chain != l->inl)
		free(l->chain);
}
