/* node.c: open files sharing one local working copy per path (node.h);
 * creates are in fresh.c, uploads in upload.c, loading in load.c.
 *
 * Locking: n->lock serialises loading, writing, truncating and uploading
 * one node and may be held across network calls. fs->nodes_lock protects
 * the list of nodes and, in every node, the fields marked below; it is only
 * held for short, local work, and taken after n->lock when both are held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/settle.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/durable/journal.h"
#include "fuse/cache/kcache.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/node/nodeset.h"
#include "fuse/node/node_int.h"
#include "fuse/transport/remote.h"
#include "fuse/outbox/wbq.h"
#include "fuse/transport/xfer.h"
#include "fuse/view/view.h"

struct mbfs_node *mbfs_node_find_shared(struct mbfs *fs, const char *path)
{
	struct mbfs_node *n = NULL;
	while ((n = mbfs_nodeset_find(fs->nodes, path, n)) && !n->shared)
		;
	return n;
}

void mbfs_node_destroy(struct mbfs *fs, struct mbfs_node *n)
{
	mbfs_xfer_pieces_forget(&n->pieces);   /* left at exit: journal */
	free(n->have);
	if (n->fd >= 0)
		close(n->fd);
	if (n->recorded && !n->unlinked) {
		/* changes the guest never got: the journal keeps them for the
		 * next mount (dirty.c) */
		free(n->local);
	} else {
		/* a file with a record left must never be reused: a later
		 * mount would take it, emptied, for data not sent */
		if (n->recorded && mbfs_journal_drop(NULL, n->local))
			mbfs_data_discard(n->local);
		else
			mbfs_data_recycle(fs->data, n->local);
	}
	pthread_mutex_destroy(&n->lock);
	mbfs_node_fd_destroy(n);
	free(n->path);
	free(n);
}

struct mbfs_node *mbfs_node_alloc(const char *path)
{
	struct mbfs_node *n = calloc(1, sizeof(*n));
	if (!n || !(n->path = strdup(path))) {
		free(n);
		return NULL;
	}
	n->fd = -1;
	n->refs = 1;
	n->shared = true;
	pthread_mutex_init(&n->lock, NULL);
	mbfs_node_fd_init(n);
	return n;
}

/* Find the shared node of path (ref taken) or insert fresh (if given). */
static struct mbfs_node *get_or_insert(struct mbfs *fs, const char *path,
				       struct mbfs_node *fresh)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (n) {
		n->refs++;
	} else if (fresh) {
		mbfs_nodeset_add(fs->nodes, fresh);
		n = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (fresh)
		mbfs_node_destroy(fs, fresh);
	return n;
}

static void mark_changed(struct mbfs *fs, struct mbfs_node *n, uint64_t size)
{
	pthread_mutex_lock(&fs->nodes_lock);
	n->size = size;
	n->dirty = true;
	n->guest_id[0] = '\0';   /* its upload makes a new file there */
	n->version++;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	pthread_mutex_unlock(&fs->nodes_lock);
}

/* A clean copy that the guest has changed since (or that an invalidation
 * marked) must not be shared with a new open. */
static bool outdated(struct mbfs *fs, struct mbfs_node *n, const char *path)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool check = n->loaded && !n->dirty && n->base_known;
	uint64_t bs = n->base_size;
	time_t bm = n->base_mtime;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!check)
		return false;
	/* what the mount shows, queued times included, as follow_guest and
	 * fgetattr compare (a utime made here moved the base too) */
	struct stat st;
	if (mbfs_view_getattr(fs, path, &st))
		return false;
	return (uint64_t)st.st_size != bs || st.st_mtim.tv_sec != bm;
}


/* An open with O_TRUNC emptied n: what it replaces is the guest's file as
 * the mount knows it now, not the copy n was made from (a fd held open
 * across a command that rewrote the file kept that older base, and the
 * upload was refused as a conflict with a change it had replaced). No
 * merge of appends either: every byte is ours. n->lock held. */
static void rebase_emptied(struct mbfs *fs, struct mbfs_node *n,
			   const char *path)
{
	struct stat st;
	bool known = mbfs_view_getattr(fs, path, &st) == 0 && S_ISREG(st.st_mode);
	pthread_mutex_lock(&fs->nodes_lock);
	if (!n->fresh && known) {
		n->base_known = true;
		n->base_size = (uint64_t)st.st_size;
		n->base_mtime = st.st_mtim.tv_sec;
		n->base_sha[0] = '\0';
		n->sha_due = false;
	}
	n->overwrote = n->base_size > 0;
	n->recheck = false;
	n->refetch = false;
	pthread_mutex_unlock(&fs->nodes_lock);
}

int mbfs_node_open(struct mbfs *fs, const char *path, int flags,
		   struct mbfs_node **out)
{
	if (mbfs_outbox_settle(fs, path, MBFS_SETTLE_MOVED_HERE))
		return -EIO;
	struct mbfs_node *n = get_or_insert(fs, path, NULL);
	if (n && outdated(fs, n, path)) {
		/* the sandbox changed the file: the node follows it, with the
		 * fds open on it (one file, one node); a copy that cannot
		 * follow (a link's, a kept one) is left to its fds */
		pthread_mutex_lock(&n->lock);
		pthread_mutex_lock(&fs->nodes_lock);
		n->recheck = true;
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_node_follow_guest(fs, n);
		pthread_mutex_unlock(&n->lock);
		pthread_mutex_lock(&fs->nodes_lock);
		bool left = n->loaded && !n->dirty;
		if (left)
			n->shared = false;
		pthread_mutex_unlock(&fs->nodes_lock);
		if (left) {
			mbfs_node_release(fs, n);
			n = NULL;
		}
	}
	if (!n) {
		/* the kernel may still hold a name that is gone (a new file
		 * whose batch failed for good, a removal on the sandbox): no
		 * node and no file means no open, not an empty file */
		struct stat st;
		if (mbfs_view_getattr(fs, path, &st) == -ENOENT)
			return mbfs_kcache_gone(fs->kcache, path) ? -ESTALE
								   : -ENOENT;
		struct mbfs_node *fresh = mbfs_node_alloc(path);
		if (!fresh)
			return -ENOMEM;
		n = get_or_insert(fs, path, fresh);
	}
	if (flags & O_TRUNC) {
		pthread_mutex_lock(&n->lock);
		int rc = mbfs_node_will_change(fs, n, true);
		if (!rc)
			rc = mbfs_load_empty(fs, n);
		if (!rc) {
			rebase_emptied(fs, n, path);
			mark_changed(fs, n, 0);
		}
		pthread_mutex_unlock(&n->lock);
		mbfs_data_drop(fs->data, path);
		if (rc) {
			mbfs_node_release(fs, n);
			return rc;
		}
	}
	*out = n;
	return 0;
}

/* A dirty n is about to be uploaded: the mkdirs queued above it go
 * first, before n->lock is taken (the flusher takes node locks). Once
 * made, no directory above an existing file can be queued again. */
static void need_dirs(struct mbfs *fs, struct mbfs_node *n)
{
	char path[MB_PATH_MAX];
	pthread_mutex_lock(&fs->nodes_lock);
	bool dirty = n->dirty && !n->unlinked;
	snprintf(path, sizeof(path), "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (dirty)
		mbfs_outbox_settle(fs, path, MBFS_SETTLE_DIRS);
}

void mbfs_node_release(struct mbfs *fs, struct mbfs_node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool last = --n->refs == 0 && !n->closing;
	if (last)
		n->closing = true;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!last)
		return;

	need_dirs(fs, n);
	pthread_mutex_lock(&n->lock);
	mbfs_node_upload(fs, n);   /* errors are logged and the data kept */
	pthread_mutex_lock(&fs->nodes_lock);
	bool unwanted = n->unlinked && n->recorded;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (unwanted)
		mbfs_node_unrecord(fs, n);
	pthread_mutex_unlock(&n->lock);

	pthread_mutex_lock(&fs->nodes_lock);
	if (n->refs > 0) {      /* opened again meanwhile: lives on */
		n->closing = false;
		pthread_mutex_unlock(&fs->nodes_lock);
		return;
	}
	mbfs_nodeset_del(fs->nodes, n);
	bool keep = n->loaded && !n->dirty && n->base_known && n->shared &&
		    !n->unlinked && !n->partial && !n->recheck;
	/* shared is current as of this stamp: an invalidation after it
	 * (mbfs_invalidate_everything unshares nodes being let go, then
	 * drops copies) makes the put below discard the copy; an open one it
	 * marked (recheck) is not kept above */
	uint64_t since = mbfs_data_stamp(fs->data);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (n->pieces.sizes)     /* last user gone: no one else fetches */
		mbfs_load_drop_pieces(fs, n);
	/* a clean copy is changed in place by whoever takes it */
	if (keep && n->fd >= 0 && n->linked && mbfs_data_shared(n->fd))
		keep = false;
	if (keep && n->fd >= 0 && n->in_memory) {
		mbfs_data_put_clean(fs->data, n->path, n->base_size,
				    n->base_mtime, NULL, n->fd, since);
		n->fd = -1;
	} else if (keep && n->fd >= 0) {
		close(n->fd);
		n->fd = -1;
		mbfs_data_put_clean(fs->data, n->path, n->base_size,
				    n->base_mtime, n->local, -1, since);
		n->local = NULL;
	}
	mbfs_node_destroy(fs, n);
}

void mbfs_node_ref(struct mbfs *fs, struct mbfs_node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	n->refs++;
	pthread_mutex_unlock(&fs->nodes_lock);
}

#define RETRY_QUIET_MS 1000

int mbfs_node_read(struct mbfs *fs, struct mbfs_node *n, char *buf,
		   size_t size, off_t off)
{
	/* a loaded copy is read without n->lock, which a load or an upload
	 * of the node may hold across network calls */
	int got = mbfs_node_pread_ready(fs, n, buf, size, off);
	if (got != -EAGAIN)
		return got;
	pthread_mutex_lock(&n->lock);
	mbfs_node_follow_guest(fs, n);
	/* the kernel follows a failed read at once with a read of its first
	 * page (another operation): one that ran out of its op_timeout a
	 * moment ago answers it now, so that a read(2) fails after one
	 * op_timeout, not two (bound.c) */
	if (n->timed_out_ms && mb_now_ms() - n->timed_out_ms < RETRY_QUIET_MS) {
		pthread_mutex_unlock(&n->lock);
		return -ETIMEDOUT;
	}
	int rc = mbfs_load(fs, n, false);
	pthread_mutex_lock(&fs->nodes_lock);
	bool partial = n->partial;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!rc && partial && size)
		rc = mbfs_load_range(fs, n, (uint64_t)off, size);
	n->timed_out_ms = rc && mb_op_expired() ? mb_now_ms() : 0;
	/* n->lock holds the copy as loaded: only its holders replace fd */
	if (!rc)
		rc = mbfs_node_pread(n->fd, buf, size, off);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int mbfs_node_write(struct mbfs *fs, struct mbfs_node *n, const char *buf,
		    size_t size, off_t off, bool append)
{
	pthread_mutex_lock(&n->lock);
	/* a clean copy the guest moved on from is fetched again first: the
	 * write goes into the guest's file as it is now */
	mbfs_node_follow_guest(fs, n);
	int rc = mbfs_load(fs, n, true);
	if (!rc)
		rc = mbfs_node_will_change(fs, n, false);
	if (!rc && append) {
		pthread_mutex_lock(&fs->nodes_lock);
		off = (off_t)n->size;
		pthread_mutex_unlock(&fs->nodes_lock);
	}
	size_t done = 0;
	while (!rc && done < size) {
		ssize_t w = pwrite(n->fd, buf + done, size - done, off + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		/* a full cache disk: clean copies go before a write fails */
		if (w < 0 && mbfs_node_make_room(fs, -errno, size - done))
			continue;
		if (w < 0)
			rc = -errno;
		else
			done += (size_t)w;
	}
	if (!rc) {
		pthread_mutex_lock(&fs->nodes_lock);
		uint64_t end = (uint64_t)off + size;
		uint64_t cur = n->size > end ? n->size : end;
		if ((uint64_t)off < n->base_size)
			n->overwrote = true;
		pthread_mutex_unlock(&fs->nodes_lock);
		mark_changed(fs, n, cur);
	}
	pthread_mutex_unlock(&n->lock);
	return rc ? rc : (int)size;
}

int mbfs_node_truncate(struct mbfs *fs, struct mbfs_node *n, off_t size)
{
	pthread_mutex_lock(&n->lock);
	/* to zero: nothing of the old content is needed */
	int rc = size == 0 ? mbfs_node_will_change(fs, n, true)
			   : mbfs_load(fs, n, true);
	if (!rc)
		rc = size == 0 ? mbfs_load_empty(fs, n)
			       : mbfs_node_will_change(fs, n, false);
	if (!rc && ftruncate(n->fd, size))
		rc = -errno;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes_lock);
		if ((uint64_t)size < n->base_size)
			n->overwrote = true;
		pthread_mutex_unlock(&fs->nodes_lock);
		mark_changed(fs, n, (uint64_t)size);
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int mbfs_node_flush(struct mbfs *fs, struct mbfs_node *n)
{
	/* queued: it goes now, in a batch; failed, it is kept and the
	 * upload below says EIO */
	mbfs_wbq_flush_node(fs, n);
	/* an older copy of the path still queued or in flight (another node:
	 * an editor's save by rename) lands first, not over this one */
	char path[MB_PATH_MAX];
	pthread_mutex_lock(&fs->nodes_lock);
	snprintf(path, sizeof(path), "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	/* the sandbox cannot be reached: it stays queued (and in the
	 * journal), in order, and goes when the sandbox answers */
	if (mbfs_outbox_settle(fs, path, MBFS_SETTLE_FILE | MBFS_SETTLE_STRICT) ||
	    mbfs_wbq_holds(fs, n))
		return -EIO;
	need_dirs(fs, n);
	pthread_mutex_lock(&n->lock);
	int rc = mbfs_node_upload(fs, n);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static void apply_local(const struct mbfs_node *n, struct stat *st)
{
	st->st_size = (off_t)n->size;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	if (n->dirty) {
		st->st_mtim = n->mtime;
		st->st_ctim = n->mtime;
	}
}

int mbfs_node_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	bool hit = n && n->loaded && (n->dirty || !n->base_known ||
				       !mbfs_node_behind(n, st));
	if (hit)
		apply_local(n, st);
	pthread_mutex_unlock(&fs->nodes_lock);
	return hit;
}

#define SYNC_BATCH 16   /* stale records settled per pass */

void mbfs_node_records_sync(struct mbfs *fs)
{
	struct mbfs_node *v[SYNC_BATCH];
	for (bool more = true; more;) {
		size_t k = 0;
		pthread_mutex_lock(&fs->nodes_lock);
		for (struct mbfs_node *n = fs->nodes->head; n && k < SYNC_BATCH; n = n->next) {
			if (n->rec_stale && n->recorded) {
				n->refs++;
				n->rec_stale = false;
				v[k++] = n;
			}
		}
		more = k == SYNC_BATCH;
		pthread_mutex_unlock(&fs->nodes_lock);
		for (size_t i = 0; i < k; i++) {
			if (!mbfs_node_settle_record(fs, v[i]))
				more = false;   /* no spinning on it */
			mbfs_node_release(fs, v[i]);
		}
	}
}


void mbfs_node_fgetattr(struct mbfs *fs, struct mbfs_node *n, struct stat *st)
{
	pthread_mutex_lock(&fs->nodes_lock);
	if (n->loaded && mbfs_node_behind(n, st))
		n->recheck = true;   /* st is the guest's: the next read follows */
	else if (n->loaded)
		apply_local(n, st);
	pthread_mutex_unlock(&fs->nodes_lock);
}

void mbfs_node_retime(struct mbfs *fs, const char *path, time_t mtime)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (!n || !n->loaded || n->dirty || !n->base_known) {
		pthread_mutex_unlock(&fs->nodes_lock);
		return;
	}
	n->refs++;
	uint64_t bs = n->base_size, version = n->version;
	time_t bm = n->base_mtime;
	pthread_mutex_unlock(&fs->nodes_lock);
	/* only a copy that matches what we know of the guest follows */
	struct stat st;
	bool current = mbfs_view_getattr(fs, path, &st) == 0 &&
		       (uint64_t)st.st_size == bs && st.st_mtim.tv_sec == bm;
	pthread_mutex_lock(&fs->nodes_lock);
	if (current && n->version == version && !n->dirty &&
	    n->base_mtime == bm)
		n->base_mtime = mtime;
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_release(fs, n);
}

int mbfs_node_get_path(struct mbfs *fs, struct mbfs_node *n, char *out)
{
	pthread_mutex_lock(&fs->nodes_lock);
	snprintf(out, MB_PATH_MAX, "%s", n->path);
	int rc = n->unlinked ? -ENOENT : 0;
	pthread_mutex_unlock(&fs->nodes_lock);
	return rc;
}

bool mbfs_node_superseded(struct mbfs *fs, struct mbfs_node *n, char *out)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool old = !n->shared && !n->unlinked && !n->dirty;
	if (old)
		snprintf(out, MB_PATH_MAX, "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	return old;
}

int mbfs_node_sync_path(struct mbfs *fs, const char *path)
{
	int rc = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (n && n->dirty)
		n->refs++;
	else
		n = NULL;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (n) {
		rc = mbfs_node_flush(fs, n);
		mbfs_node_release(fs, n);
	}
	return rc;
}

int mbfs_node_truncate_path(struct mbfs *fs, const char *path, off_t size,
			    int *rc)
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!n)
		return 0;
	*rc = mbfs_node_truncate(fs, n, size);
	if (!*rc)
		*rc = mbfs_node_flush(fs, n);
	mbfs_node_release(fs, n);
	return 1;
}

void mbfs_node_flush_all(struct mbfs *fs)
{
	size_t left = 0;
	for (;;) {
		pthread_mutex_lock(&fs->nodes_lock);
		struct mbfs_node *n = fs->nodes->head;
		while (n && !(n->dirty && !n->unlinked && !(n->kept_any)))
			n = n->next;
		if (n)
			n->refs++;
		pthread_mutex_unlock(&fs->nodes_lock);
		if (!n) {
			if (left)
				mb_log(MB_LOG_WARN, "%zu file%s could not reach the "
				       "sandbox before the unmount: the journal "
				       "keeps %s, and the next mount of this "
				       "sandbox with this cache sends %s", left,
				       left == 1 ? "" : "s",
				       left == 1 ? "it" : "them",
				       left == 1 ? "it" : "them");
			mbfs_xfer_sweep(fs);   /* staging failures left */
			return;
		}
		/* still queued after the queue stopped: disconnected */
		left += mbfs_wbq_holds(fs, n);
		if (mbfs_node_flush(fs, n)) {
			pthread_mutex_lock(&fs->nodes_lock);
			n->kept_any = true;   /* do not loop on it */
			pthread_mutex_unlock(&fs->nodes_lock);
		}
		mbfs_node_release(fs, n);
	}
}

void mbfs_node_free_all(struct mbfs *fs)
{
	while (fs->nodes->head) {
		struct mbfs_node *n = fs->nodes->head;
		mbfs_nodeset_del(fs->nodes, n);
		mbfs_node_destroy(fs, n);
	}
}
