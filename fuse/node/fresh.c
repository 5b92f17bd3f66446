/* fresh.c: files created here (node.h). A create makes a node only (new,
 * dirty, empty) and answers from it; the file comes into existence on the
 * guest with the node's first upload (upload.c). Until then getattr,
 * readdir, chmod and unlink are answered from the node, and an exclusive
 * create is checked against what the kernel's lookup saw (our caches).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#include "fuse/outbox/batch.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/cache/inode.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/node/nodeset.h"
#include "fuse/node/node_int.h"
#include "fuse/outbox/newdir.h"
#include "fuse/view/view.h"
#include "fuse/outbox/settle.h"
#include "fuse/outbox/wbq.h"
#include "fuse/transport/xfer_int.h"

/* Does path exist, for a create with these open flags? 1, 0 or -errno.
 * O_EXCL and O_TRUNC trust what the kernel's lookup has just seen (our
 * caches and listings; a race with a creator on the guest is accepted, as
 * in sshfs). A plain O_CREAT may go on to append to a file made on the
 * guest behind a cached negative entry, so it asks the guest. */
static int exists_for_create(struct mbfs *fs, const char *path, int flags)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *o = mbfs_node_find_shared(fs, path);
	bool here = o && !o->unlinked;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (here)
		return 1;
	struct stat st;
	int rc = (flags & (O_EXCL | O_TRUNC)) ? mbfs_view_getattr(fs, path, &st)
					      : mbfs_view_refresh(fs, path, &st);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* All attributes of a fresh node. nodes_lock held. */
static void fresh_stat(struct mbfs *fs, const struct mbfs_node *n,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | n->mode;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)n->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_mtim = n->mtime;
	st->st_atim = n->mtime;
	st->st_ctim = n->mtime;
	st->st_ino = (ino_t)mbfs_ino(fs, n->path);
}

/* An entry of path's directory changes here alone (its batch, if any,
 * comes later): times queued for the directory land first, or they would
 * show over the change. */
static void dir_changes(struct mbfs *fs, const char *path)
{
	mbfs_outbox_settle(fs, path, MBFS_SETTLE_TIMES_PARENT);
	mbfs_wbq_parent_changes(fs, path, true);
}

int mbfs_node_create(struct mbfs *fs, const char *path, unsigned mode,
		     int flags, struct mbfs_node **out)
{
	int rc = exists_for_create(fs, path, flags);
	if (rc)
		return rc > 0 ? -EEXIST : rc;
	struct mbfs_node *n = mbfs_node_alloc(path);
	if (!n)
		return -ENOMEM;
	pthread_mutex_lock(&n->lock);
	rc = mbfs_load_empty(fs, n);
	pthread_mutex_unlock(&n->lock);
	if (rc) {
		mbfs_node_destroy(fs, n);
		return rc;
	}
	struct stat st;
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *o = mbfs_node_find_shared(fs, path);
	if (o && !o->unlinked) {
		/* created by another thread meanwhile */
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_node_destroy(fs, n);
		return -EEXIST;
	}
	n->fresh = true;
	n->dirty = true;
	n->mode = mode & 07777;
	n->version = 1;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	/* nothing is there: a node still shared under this name is older */
	for (o = mbfs_nodeset_find(fs->nodes, path, NULL); o;
	     o = mbfs_nodeset_find(fs->nodes, path, o))
		o->shared = false;
	mbfs_nodeset_add(fs->nodes, n);
	fresh_stat(fs, n, &st);
	pthread_mutex_unlock(&fs->nodes_lock);
	/* in the journal before it is seen: a crash from now on leaves a
	 * record the next mount uploads */
	pthread_mutex_lock(&n->lock);
	rc = mbfs_node_will_change(fs, n, false);
	pthread_mutex_unlock(&n->lock);
	if (rc) {
		pthread_mutex_lock(&fs->nodes_lock);
		n->unlinked = true;   /* never uploaded: it was never there */
		n->shared = false;
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_node_release(fs, n);
		return rc;
	}
	mbfs_data_drop(fs->data, path);
	/* the directory's mtime becomes now (cache.h): times still queued
	 * for it land first, or they would show over it */
	dir_changes(fs, path);
	mbfs_cache_put(fs->cache, path, &st);
	*out = n;
	return 0;
}

int mbfs_node_stat_new(struct mbfs *fs, struct mbfs_node *n, const char *path,
		       struct stat *st)
{
	pthread_mutex_lock(&fs->nodes_lock);
	if (!n)
		n = mbfs_node_find_shared(fs, path);
	bool fresh = n && n->fresh && !n->unlinked;
	if (fresh)
		fresh_stat(fs, n, st);
	pthread_mutex_unlock(&fs->nodes_lock);
	return fresh;
}

/* The shared node of path with a reference, locked, when it is fresh;
 * NULL otherwise. n->lock waits for an upload in progress. */
static struct mbfs_node *lock_fresh(struct mbfs *fs, const char *path)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (n && n->fresh)
		n->refs++;
	else
		n = NULL;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!n)
		return NULL;
	/* in a batch being sent, it is on its way to the guest: wait for
	 * the outcome (then it is fresh no more, or failed and kept) */
	pthread_mutex_lock(&n->lock);
	while (mbfs_wbq_busy(fs, n)) {
		pthread_mutex_unlock(&n->lock);
		mbfs_wbq_wait_idle(fs, n);
		pthread_mutex_lock(&n->lock);
	}
	pthread_mutex_lock(&fs->nodes_lock);
	bool fresh = n->fresh && !n->unlinked;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (fresh)
		return n;
	pthread_mutex_unlock(&n->lock);
	mbfs_node_release(fs, n);
	return NULL;
}

static void set_mode(struct stat *st, const void *arg)
{
	st->st_mode = (st->st_mode & S_IFMT) | *(const unsigned *)arg;
}

int mbfs_node_chmod_new(struct mbfs *fs, const char *path, unsigned mode)
{
	struct mbfs_node *n = lock_fresh(fs, path);
	if (!n)
		return 0;
	mode &= 07777;
	pthread_mutex_lock(&fs->nodes_lock);
	n->mode = mode;
	n->rec_stale = n->recorded;
	pthread_mutex_unlock(&fs->nodes_lock);
	/* the journal's record carries the mode to a later mount */
	mbfs_node_will_record(fs, n);
	pthread_mutex_unlock(&n->lock);
	mbfs_node_release(fs, n);
	mbfs_cache_modify(fs->cache, path, set_mode, &mode);
	return 1;
}

int mbfs_node_unlink_new(struct mbfs *fs, const char *path)
{
	struct mbfs_node *n = lock_fresh(fs, path);
	if (!n)
		return 0;
	pthread_mutex_lock(&fs->nodes_lock);
	n->unlinked = true;
	n->shared = false;
	bool replaces = n->replaces;
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_unrecord(fs, n);   /* never to be uploaded */
	pthread_mutex_unlock(&n->lock);
	mbfs_node_release(fs, n);
	dir_changes(fs, path);
	return replaces ? 2 : 1;
}

/* May path `to` take a file renamed from a fresh node? 0 or -errno, from
 * what the mount knows (caches, nodes), as a create checks. */
static int can_take(struct mbfs *fs, const char *to, unsigned flags)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *o = mbfs_node_find_shared(fs, to);
	bool here = o && !o->unlinked;
	pthread_mutex_unlock(&fs->nodes_lock);
	struct stat st;
	int rc = here ? 0 : mbfs_view_getattr(fs, to, &st);
	if (rc == 0 && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (rc == 0 && !here && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (rc && rc != -ENOENT)
		return rc;
	char dir[MB_PATH_MAX];
	const char *slash = strrchr(to, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash && slash != to ?
		 (int)(slash - to) : 1, to);
	rc = mbfs_view_getattr(fs, dir, &st);
	if (rc == 0 && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	return rc;
}

/* Before a file created here at from takes the name to: a removal queued
 * for to would land after the file (queued before it) and remove it, so
 * it goes first. 0, or -EIO (it could not be sent). No node lock held. */
static int clear_name(struct mbfs *fs, const char *from, const char *to)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, from);
	bool fresh = n && n->fresh;
	pthread_mutex_unlock(&fs->nodes_lock);
	return fresh ? mbfs_outbox_settle(fs, to, MBFS_SETTLE_REMOVALS) : 0;
}

int mbfs_node_rename_new(struct mbfs *fs, const char *from, const char *to,
			 unsigned flags, int *rc)
{
	if ((*rc = clear_name(fs, from, to)))
		return 1;
	struct mbfs_node *n = lock_fresh(fs, from);
	if (!n)
		return 0;
	*rc = can_take(fs, to, flags);
	pthread_mutex_lock(&fs->nodes_lock);
	bool replaced = n->replaces;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!*rc) {
		/* a rename replaces what is there, which the mount may not
		 * see (a file open there and hidden keeps its guest name until
		 * this rename replaces it, hidden.h): its batch does not ask
		 * for the name to be free, and removed before it travels, it
		 * still removes the name on the guest (unlink_new) */
		pthread_mutex_lock(&fs->nodes_lock);
		n->replaces = true;
		pthread_mutex_unlock(&fs->nodes_lock);
		/* nothing of it is on the guest: the rename is ours alone,
		 * and its batch puts it under the new name (over what is
		 * there, atomically) */
		mbfs_node_renamed(fs, from, to);
		mbfs_node_will_record(fs, n);   /* the record follows */
		dir_changes(fs, from);
		dir_changes(fs, to);
		mbfs_data_drop(fs->data, to);
		mbfs_cache_renamed(fs->cache, from, to);
		mbfs_ino_renamed(fs, from, to);
	}
	pthread_mutex_unlock(&n->lock);
	mbfs_node_release(fs, n);
	return !*rc && replaced ? 2 : 1;
}

/* c (new, c->lock held) shares n's working file (n->lock held) through a
 * second name: no copy is made until one of them changes (dirty.c). 0, or
 * -errno when it cannot (then copy). */
static int share_file(struct mbfs *fs, struct mbfs_node *n,
		      struct mbfs_node *c, uint64_t size)
{
	struct stat st;
	if (!n->local || n->kept_file || fstat(n->fd, &st) ||
	    (uint64_t)st.st_size != size)
		return -EINVAL;
	int rc = mbfs_data_linkfile(fs->data, n->local, &c->local, &c->fd);
	if (rc)
		return rc;
	n->linked = c->linked = true;
	pthread_mutex_lock(&fs->nodes_lock);
	c->loaded = true;
	pthread_mutex_unlock(&fs->nodes_lock);
	return 0;
}

/* c (new, c->lock held) gets a copy of n's data (n->lock held). */
static int copy_file(struct mbfs *fs, struct mbfs_node *n,
		     struct mbfs_node *c, uint64_t size)
{
	char *buf = malloc(size ? size : 1);
	int rc = buf ? mbfs_load_empty(fs, c) : -ENOMEM;
	if (!rc)
		rc = mbfs_pread_all(n->fd, buf, size, 0);
	if (!rc)
		rc = mbfs_pwrite_all(c->fd, buf, size, 0);
	free(buf);
	return rc;
}

/* A new fresh node at to holding n's data (n->lock held), queued for
 * write-back. 0 or -errno. */
static int copy_new(struct mbfs *fs, struct mbfs_node *n, const char *to)
{
	struct mbfs_node *c = mbfs_node_alloc(to);
	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&fs->nodes_lock);
	uint64_t size = n->size;
	unsigned mode = n->mode;
	struct timespec mtime = n->mtime;
	pthread_mutex_unlock(&fs->nodes_lock);
	pthread_mutex_lock(&c->lock);
	int rc = share_file(fs, n, c, size);
	if (rc)
		rc = copy_file(fs, n, c, size);
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		mbfs_node_destroy(fs, c);
		return rc;
	}
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *o = mbfs_node_find_shared(fs, to);
	if (o && !o->unlinked) {
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_node_destroy(fs, c);
		return -EEXIST;
	}
	c->fresh = true;
	c->dirty = true;
	c->mode = mode;
	c->size = size;
	c->mtime = mtime;
	c->version = 1;
	mbfs_nodeset_add(fs->nodes, c);
	struct stat st;
	fresh_stat(fs, c, &st);
	pthread_mutex_unlock(&fs->nodes_lock);
	pthread_mutex_lock(&c->lock);
	rc = mbfs_node_will_record(fs, c);   /* journaled first */
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		pthread_mutex_lock(&fs->nodes_lock);
		c->unlinked = true;
		c->shared = false;
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_node_release(fs, c);
		return rc;
	}
	mbfs_data_drop(fs->data, to);
	dir_changes(fs, to);
	mbfs_cache_put(fs->cache, to, &st);
	if (!mbfs_wbq_add(fs, c, size))
		rc = mbfs_node_flush(fs, c);
	mbfs_node_release(fs, c);
	return rc;
}

int mbfs_node_link_new(struct mbfs *fs, const char *from, const char *to,
		       int *rc)
{
	if (fs->sync_close)
		return 0;
	if ((*rc = clear_name(fs, from, to)))
		return 1;
	struct mbfs_node *n = lock_fresh(fs, from);
	if (!n)
		return 0;
	pthread_mutex_lock(&fs->nodes_lock);
	bool small = n->size <= MBFS_WBQ_FILE_MAX && mbfs_wbq_queued(fs, n);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (small) {
		/* closed and queued, nothing of it on the guest: the new
		 * name is a copy that travels in a batch too (git's objects:
		 * written as a temporary, linked into place, the temporary
		 * removed, which then never travels) */
		*rc = can_take(fs, to, RENAME_NOREPLACE);
		if (!*rc)
			*rc = copy_new(fs, n, to);
	}
	pthread_mutex_unlock(&n->lock);
	mbfs_node_release(fs, n);
	return small;
}

struct dirents {
	struct mbfs_dirent *v;
	size_t n, cap;
};

static int add_dirent(void *ud, const char *name, const struct stat *st)
{
	struct dirents *d = ud;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 4;
		struct mbfs_dirent *nv = realloc(d->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		d->v = nv;
		d->cap = cap;
	}
	if (!(d->v[d->n].name = strdup(name)))
		return -ENOMEM;
	d->v[d->n].st = *st;
	d->n++;
	return 0;
}

int mbfs_node_list_new(struct mbfs *fs, const char *dir,
		       struct mbfs_dirent **out, size_t *count)
{
	struct dirents d = { NULL, 0, 0 };
	int rc = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *x = fs->nodes->head; x && !rc; x = x->next) {
		const char *slash = strrchr(x->path, '/');
		size_t dl = (size_t)(slash - x->path);
		if (!x->fresh || !x->shared || x->unlinked ||
		    !(dl == 0 ? strcmp(dir, "/") == 0
			      : strncmp(x->path, dir, dl) == 0 && dir[dl] == '\0'))
			continue;
		struct stat st;
		fresh_stat(fs, x, &st);
		rc = add_dirent(&d, slash + 1, &st);
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!rc)
		rc = mbfs_newdir_each(fs->newdirs, dir, add_dirent, &d);
	if (rc) {
		mbfs_dirents_free(d.v, d.n);
		return rc;
	}
	*out = d.v;
	*count = d.n;
	return 0;
}

void mbfs_dirents_free(struct mbfs_dirent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}
