/* itab_lock.c: the tree locks of the kernel's inodes (itab.h).
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "common/util.h"
#include "fuse/face/itab.h"
#include "fuse/face/itab_int.h"

/* A request's set is taken whole or not at all, so two requests never
 * wait for each other. */

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
		for (int i = 0; i < 2; i++) {   /* marks of the last round */
			if (waiting[i]) {
				waiting[i]->wwait--;
				itab_maybe_free_locked(t, waiting[i]);
			}
			waiting[i] = NULL;
		}
		for (int i = 0; i < 2; i++) {
			r[i] = l->read[i] ? itab_get_locked(t, l->read[i]) : NULL;
			if (l->read[i] && !r[i])
				rc = -ESTALE;
			w[i] = l->wname[i] ? itab_find_locked(t, l->wdir[i], l->wname[i])
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
		struct inode *w = l->wino[i] ? itab_get_locked(t, l->wino[i]) : NULL;
		if (w) {
			w->treelock = 0;
			itab_maybe_free_locked(t, w);
		}
	}
	for (size_t i = 0; i < l->nchain; i++) {
		struct inode *n = itab_get_locked(t, l->chain[i]);
		if (n) {
			n->treelock--;
			itab_maybe_free_locked(t, n);
		}
	}
	pthread_cond_broadcast(&t->tree);
	pthread_mutex_unlock(&t->lock);
	if (l->chain && l->chain != l->inl)
		free(l->chain);
}
