/* itab_open.c: the kernel's inodes (itab.h): what is open on a node,
 * auto_cache's check at an open, and what a node without a path shows.
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

void mbfs_itab_set_stat(struct mbfs_itab *t, uint64_t ino, const struct stat *st)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	if (n)
		itab_note_stat_locked(n, st);
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
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
	if (n && n != &t->root) {
		itab_unname_locked(t, n);
		itab_maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
}

bool mbfs_itab_hidden(struct mbfs_itab *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	bool h = n && n->hidden;
	pthread_mutex_unlock(&t->lock);
	return h;
}

int mbfs_itab_cache_age(struct mbfs_itab *t, uint64_t ino, uint64_t max_ms)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
	int rc = n && n->cache_valid && mb_now_ms() - n->st_ms > max_ms ? 2 : 0;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

bool mbfs_itab_opened(struct mbfs_itab *t, uint64_t ino, uint64_t fh,
		      bool cache)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
	if (n)
		n->cache_valid = false;
	pthread_mutex_unlock(&t->lock);
}

bool mbfs_itab_closing(struct mbfs_itab *t, uint64_t ino, uint64_t fh)
{
	pthread_mutex_lock(&t->lock);
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
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
	struct inode *n = itab_get_locked(t, ino);
	bool last_hidden = false;
	if (n && n->open) {
		n->open--;
		if (!n->open && n->hidden) {
			n->hidden = false;
			last_hidden = true;
		}
		/* a hidden node keeps its name until the caller removed it */
		if (!last_hidden)
			itab_maybe_free_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
	return last_hidden;
}
