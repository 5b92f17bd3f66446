/* wbnode.c: what write-back does to a node (node_int.h): close queues a
 * small dirty copy instead of uploading it (wbq.h); the flusher takes the
 * copy's bytes, path, mode and mtime, and settles the node once its batch
 * is done, as upload.c does after an upload: clean and unrecorded on
 * success, kept (dirty.c) on failure. Times set on a queued file travel
 * in its batch. Does not form or send batches (wbq.c, wbsend.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/settle.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/durable/fdio.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbsend.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"
#include "fuse/view/view.h"

/* The working copy carries the file's mtime, so that a replay after a
 * crash gives the file its time (recover.c). */
static void stamp(int fd, struct timespec mtime)
{
	const struct timespec tv[2] = { { 0, UTIME_OMIT }, mtime };
	if (fd >= 0 && futimens(fd, tv))
		mb_log(MB_LOG_DEBUG, "cannot set the time of a working copy: %s",
		       strerror(errno));
}

int mbfs_node_close(struct mbfs *fs, struct mbfs_node *n)
{
	if (!fs->sync_close) {
		pthread_mutex_lock(&fs->nodes_lock);
		bool dirty = n->dirty && !n->unlinked;
		bool kept = n->kept_any && n->kept_version == n->version;
		uint64_t size = n->size;
		bool fits = mbfs_wbsend_fits(n->path);
		int fd = n->fd;   /* the closer's node: its copy stays */
		struct timespec mtime = n->mtime;
		uint64_t version = n->version;
		bool synced = n->durable_version == version;
		pthread_mutex_unlock(&fs->nodes_lock);
		if (!dirty)
			return 0;
		stamp(fd, mtime);
		/* on disk before close() returns, with its record and the
		 * outbox lines before it (journal.h: the lines' sync shared
		 * by the closes of a moment): then the network can wait. A
		 * failed sync says
		 * EIO, and the data still goes. Not again for a version
		 * synced already: each child a writer starts closes the fd
		 * it inherited, a flush with nothing new */
		int crc = synced ? 0 : mbfs_journal_commit(fs->journal, fd);
		if (!synced && !crc) {
			pthread_mutex_lock(&fs->nodes_lock);
			if (n->durable_version < version)
				n->durable_version = version;
			pthread_mutex_unlock(&fs->nodes_lock);
		}
		if (!kept && fits && size <= MBFS_WBQ_FILE_MAX &&
		    mbfs_wbq_add(fs, n, size)) {
			pthread_mutex_lock(&fs->nodes_lock);
			if (n->closed_version < version)
				n->closed_version = version;
			pthread_mutex_unlock(&fs->nodes_lock);
			return crc;
		}
		int rc = mbfs_node_flush(fs, n);
		return rc ? rc : crc;
	}
	int rc = mbfs_node_flush(fs, n);
	if (rc) {   /* not sent: on disk before close says so */
		pthread_mutex_lock(&fs->nodes_lock);
		int fd = n->fd;
		pthread_mutex_unlock(&fs->nodes_lock);
		mbfs_journal_commit(fs->journal, fd);
	}
	return rc;
}

/* A file written and still open that a batch can carry (a log, an
 * editor's file); a larger one being written (a download, dd) goes at its
 * close, not once more at every command. nodes_lock held. */
static bool written_open(const struct mbfs_node *n)
{
	return n->dirty && !n->unlinked && n->refs > 0 && !n->closing &&
	       !n->kept_any && n->size <= MBFS_WBQ_FILE_MAX &&
	       n->version != n->closed_version;   /* queued as it is */
}

int mbfs_node_close_open(struct mbfs *fs)
{
	size_t k = 0, cap = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = fs->nodes->head; n; n = n->next)
		cap += written_open(n);
	struct mbfs_node **v = cap ? calloc(cap, sizeof(*v)) : NULL;
	for (struct mbfs_node *n = fs->nodes->head; v && n && k < cap; n = n->next) {
		if (written_open(n)) {
			n->refs++;
			v[k++] = n;
		}
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (cap && !v)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < k; i++) {
		int r = mbfs_node_close(fs, v[i]);
		rc = rc ? rc : r;
		mbfs_node_release(fs, v[i]);
	}
	free(v);
	return rc;
}

/* The guest's file moved on since n's copy was fetched (a command
 * appended to a log), and every write of ours since went past the copy's
 * old end (an O_APPEND writer, or one writing at the end): our bytes
 * append to the guest's file as it is now, as two appenders' lines
 * interleave on a local disk, instead of the whole copy being refused as
 * a conflict. The copy becomes the guest's file with our bytes after it,
 * on the guest's file as its base: the local file first, then the
 * journal's record (a crash between the two leaves the old base, and the
 * replay keeps both as a conflict). st: the guest's attributes now.
 * n->lock held. Nothing changes when it cannot: the batch's base check
 * then keeps the copy, as before. */
static void merge_appends(struct mbfs *fs, struct mbfs_node *n,
			  const char *path, const struct stat *st)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool moved = (uint64_t)st->st_size != n->base_size ||
		     st->st_mtim.tv_sec != n->base_mtime;
	bool ours_only = n->base_known && !n->overwrote && !n->fresh &&
			 !n->unlinked && n->size >= n->base_size;
	uint64_t from = n->base_size, to = n->size;
	pthread_mutex_unlock(&fs->nodes_lock);
	uint64_t theirs = (uint64_t)st->st_size, len = theirs + (to - from);
	if (!moved || !ours_only || len > MBFS_WBQ_FILE_MAX || n->fd < 0)
		return;
	char *buf = malloc(len ? len : 1);
	int tfd = -1;
	uint64_t got = 0;
	struct mb_err err;
	mb_err_clear(&err);
	int rc = !buf ? -ENOMEM : mbfs_data_memfile(&tfd);
	if (!rc)
		rc = mbfs_pread_all(n->fd, buf + theirs, to - from, (off_t)from);
	if (!rc)
		rc = mbfs_xfer_download(fs, path, theirs, tfd, &got, &err);
	if (!rc && got != theirs)
		rc = -EAGAIN;   /* still moving: the base check decides */
	if (!rc)
		rc = mbfs_pread_all(tfd, buf, theirs, 0);
	if (!rc)
		rc = mbfs_node_will_change(fs, n, false);
	if (!rc)
		rc = mbfs_pwrite_all(n->fd, buf, len, 0);
	if (!rc && ftruncate(n->fd, (off_t)len))
		rc = -errno;
	if (tfd >= 0)
		close(tfd);
	free(buf);
	if (rc) {
		mb_log(MB_LOG_DEBUG, "cannot append '%s' to the sandbox's "
		       "new version (the batch's base check decides): %s", path,
		       err.msg[0] ? err.msg : strerror(-rc));
		return;
	}
	pthread_mutex_lock(&fs->nodes_lock);
	n->size = len;
	n->base_size = theirs;
	n->base_mtime = st->st_mtim.tv_sec;
	n->rec_stale = n->recorded;
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_will_record(fs, n);
	mb_log(MB_LOG_INFO, "'%s' grew on the sandbox while written here at "
	       "its end: %llu bytes of ours follow its %llu", path,
	       (unsigned long long)(to - from), (unsigned long long)theirs);
}

int mbfs_node_wb_take(struct mbfs *fs, struct mbfs_node *n,
		      struct mbfs_wbfile *f)
{
	char path[MB_PATH_MAX];
	int rc = 0;
	pthread_mutex_lock(&n->lock);
	pthread_mutex_lock(&fs->nodes_lock);
	bool dirty = n->dirty && !n->unlinked;
	bool kept = n->kept_any && n->kept_version == n->version;
	bool fresh = n->fresh;
	unsigned mode = n->mode;
	uint64_t size = n->size, version = n->version;
	struct timespec mtime = n->mtime;
	bool held = n->refs > 1;   /* open, or in use, besides our queue */
	snprintf(path, sizeof(path), "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	/* a failed and kept version waits for fsync or close to say so */
	if (!dirty || kept || n->fd < 0)
		goto out;
	/* grown past a batch while still open (dd dup2()s its output and
	 * closes the first descriptor, which queued the file empty): its
	 * next close or last release uploads it; an upload now would stall
	 * the writer and be repeated at that close */
	if (size > MBFS_WBQ_FILE_MAX && held)
		goto out;
	rc = -1;
	if (size > MBFS_WBQ_FILE_MAX || !mbfs_wbsend_fits(path) ||
	    mbfs_check_alive(fs))
		goto out;
	struct stat st;
	bool known = !fresh && mbfs_view_getattr(fs, path, &st) == 0 &&
		     S_ISREG(st.st_mode);
	if (!fresh)   /* the mode of the file it replaces, as a PUT keeps it */
		mode = known ? st.st_mode & 07777 : 0600;
	if (known) {
		merge_appends(fs, n, path, &st);
		pthread_mutex_lock(&fs->nodes_lock);
		size = n->size;
		pthread_mutex_unlock(&fs->nodes_lock);
	}
	char *data = malloc(size ? size : 1);
	if (!data || mbfs_pread_all(n->fd, data, size, 0) ||
	    !(f->path = strdup(path))) {
		free(data);
		goto out;
	}
	f->data = data;
	f->len = size;
	f->mode = mode;
	f->mtime = mtime;
	/* made on the guest meanwhile, or changed there since the copy was
	 * read: the guest's stays and this one is kept (a conflict) */
	pthread_mutex_lock(&fs->nodes_lock);
	if (n->fresh && !n->replaces) {
		f->base = MBFS_BASE_ABSENT;
	} else if (!n->fresh && n->base_known) {
		f->base = MBFS_BASE_STAT;
		f->base_size = n->base_size;
		f->base_mtime = n->base_mtime;
	} else if (known) {   /* emptied at open (O_TRUNC): what was known */
		f->base = MBFS_BASE_STAT;
		f->base_size = (uint64_t)st.st_size;
		f->base_mtime = st.st_mtim.tv_sec;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	f->tag = version;
	rc = 1;
out:
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int mbfs_node_wb_upload(struct mbfs *fs, struct mbfs_node *n)
{
	pthread_mutex_lock(&n->lock);
	int rc = mbfs_node_upload(fs, n);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static void guest_stat(struct mbfs *fs, const struct mbfs_wbfile *f,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | f->mode;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)f->len;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((f->len + 511) / 512);
	st->st_mtim = f->mtime;
	st->st_atim = st->st_ctim = st->st_mtim;
}

void mbfs_node_wb_done(struct mbfs *fs, struct mbfs_node *n,
		       const struct mbfs_wbfile *f, int rc, const char *why)
{
	char sha[65] = "";
	if (!rc)
		mb_sha256_hex(f->data, f->len, sha);
	pthread_mutex_lock(&n->lock);
	pthread_mutex_lock(&fs->nodes_lock);
	bool here = !n->unlinked && strcmp(n->path, f->path) == 0;
	bool same = here && n->version == f->tag;
	/* a time set while the batch was in flight (retime above) */
	bool timed = same && n->times_version == n->version &&
		     (n->mtime.tv_sec != f->mtime.tv_sec ||
		      n->mtime.tv_nsec != f->mtime.tv_nsec);
	struct timespec tv[2] = { { 0, UTIME_OMIT }, n->mtime };
	struct stat st;
	guest_stat(fs, f, &st);
	if (!rc && here) {
		/* the cache shows the file before the node stops showing it
		 * as fresh: a readdir between the two would miss it */
		mbfs_cache_put(fs->cache, f->path, &st);
		mbfs_node_forget_ids(fs, f->path);
		/* the guest has this version now, whatever came after it */
		n->fresh = false;
		n->base_known = true;
		n->base_size = f->len;
		n->base_mtime = timed ? tv[1].tv_sec : f->mtime.tv_sec;
		memcpy(n->base_sha, sha, sizeof(n->base_sha));
		n->sha_due = false;
		if (same) {
			n->dirty = false;
			n->overwrote = false;
		} else
			n->rec_stale = n->recorded;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!rc) {
		if (same)
			mbfs_node_unrecord(fs, n);   /* the guest has it */
		else if (here)
			mbfs_node_will_record(fs, n);   /* new base */
		mbfs_data_drop(fs->data, f->path);
		if (!here)   /* replaced or moved meanwhile: not what the path shows */
			mbfs_cache_invalidate(fs->cache, f->path);
		if (timed)
			mbfs_batch_utimens(fs, f->path, tv);
	} else if (same) {
		struct mb_err err;
		mb_err_clear(&err);
		mb_err_set(&err, -rc, "%s", why && why[0] ? why : strerror(-rc));
		mbfs_cache_invalidate(fs->cache, f->path);
		mbfs_node_keep(fs, n, f->path, f->tag, rc, &err);
	} else {
		mb_log(MB_LOG_DEBUG, "batch upload of '%s' failed (%s); it "
		       "changed since and goes again", f->path, why ? why : "");
	}
	pthread_mutex_unlock(&n->lock);
}

int mbfs_node_wb_retime(struct mbfs *fs, const char *path,
			const struct timespec *mtime)
{
	if (fs->sync_close || mtime->tv_nsec == UTIME_OMIT)
		return 0;
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	/* a queued copy, or one that close will queue (tar and cp -p set
	 * times before they close): its batch carries the time; if it is
	 * uploaded instead (fsync first, grown too large), upload.c queues
	 * the time after it. In a batch being sent (tar sets times after
	 * close): wb_done queues the time after the batch, so utime never
	 * waits for the network */
	bool take = n && n->dirty && !n->unlinked &&
		    (mbfs_wbq_queued(fs, n) || mbfs_wbq_busy(fs, n) ||
		     (n->size <= MBFS_WBQ_FILE_MAX &&
		      mbfs_wbsend_fits(n->path)));
	if (take) {
		n->mtime = *mtime;
		if (mtime->tv_nsec == UTIME_NOW)
			clock_gettime(CLOCK_REALTIME, &n->mtime);
		n->times_version = n->version;
		stamp(n->fd, n->mtime);
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	return take;
}

int mbfs_node_before_utimens(struct mbfs *fs, const char *path, bool now,
			     const struct timespec t[2])
{
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	bool dirty = n && n->dirty;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (dirty && mbfs_node_wb_retime(fs, path, &t[1]))
		return 1;   /* its batch sets the time */
	/* a directory: its time follows the files queued in it, or they
	 * land first */
	if (!n && (t[1].tv_nsec == UTIME_OMIT ||
		   !mbfs_wbq_dir_time(fs, path, &t[1])))
		mbfs_outbox_settle(fs, path, MBFS_SETTLE_CHILDREN);
	if (dirty && now)
		return 1;   /* its upload will set "now" anyway */
	return dirty ? mbfs_node_sync_path(fs, path) : 0;
}

static struct mbfs_wbq_entry *wb_entry(const struct mbfs_node *n)
{
	return n->wbq;
}

static void wb_set_entry(struct mbfs_node *n, struct mbfs_wbq_entry *e)
{
	n->wbq = e;
}

static const char *wb_where(const struct mbfs_node *n)
{
	return n->path;
}

const struct mbfs_wbq_files mbfs_node_wbq_files = {
	.ref = mbfs_node_ref,
	.release = mbfs_node_release,
	.take = mbfs_node_wb_take,
	.done = mbfs_node_wb_done,
	.upload = mbfs_node_wb_upload,
	.path = mbfs_node_get_path,
	.entry = wb_entry,
	.set_entry = wb_set_entry,
	.where = wb_where,
};
