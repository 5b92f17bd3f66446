/* dirty.c: a node's changes in the journal (journal.h, node_int.h): the
 * record written before the first change of a copy and rewritten when its
 * path moves, dropped once the data is on the guest or kept; a failed
 * upload's data moved under kept/ (never copied); room made on a full cache
 * disk by evicting clean copies. Does not upload (upload.c) and does not
 * decide when to (node.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/durable/journal.h"
#include "fuse/node/node.h"
#include "fuse/node/node_int.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer_int.h"
#include "fuse/view/view.h"


bool mbfs_node_make_room(struct mbfs *fs, int rc, uint64_t want)
{
	if (rc != -ENOSPC && rc != -EDQUOT)
		return false;
	return mbfs_data_evict(fs->data, want ? want : MBFS_CHUNK) > 0;
}

/* A new empty working file, making room when the disk is full. */
static int new_file(struct mbfs *fs, char **local, int *fd)
{
	int rc;
	do
		rc = mbfs_data_newfile(fs->data, local, fd);
	while (rc && mbfs_node_make_room(fs, rc, 0));
	return rc;
}

/* Copy [*in, size) of from to to at *out with read and write: for files on
 * two file systems (a copy in memory, data.h), where copy_file_range says
 * EXDEV. */
static int copy_by_hand(struct mbfs *fs, int from, int to, off_t *in,
			off_t *out, off_t size)
{
	char buf[65536];
	while (*in < size) {
		size_t want = (size_t)(size - *in) < sizeof(buf)
			? (size_t)(size - *in) : sizeof(buf);
		int rc = mbfs_pread_all(from, buf, want, *in);
		while (!rc && (rc = mbfs_pwrite_all(to, buf, want, *out)) &&
		       mbfs_node_make_room(fs, rc, want))
			;
		if (rc)
			return rc;
		*in += (off_t)want;
		*out += (off_t)want;
	}
	return 0;
}

/* Copy all of from into to (both open), making room when needed. */
static int copy_all(struct mbfs *fs, int from, int to)
{
	struct stat st;
	if (fstat(from, &st))
		return -errno;
	off_t in = 0, out = 0;
	while (in < st.st_size) {
		ssize_t n = copy_file_range(from, &in, to, &out,
					    (size_t)(st.st_size - in), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EINVAL ||
			      errno == EOPNOTSUPP || errno == ENOSYS))
			return copy_by_hand(fs, from, to, &in, &out, st.st_size);
		if (n < 0 && mbfs_node_make_room(fs, -errno, (uint64_t)(st.st_size - in)))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	return 0;
}

/* n's file was moved under kept/, or is shared with a link: give n a file
 * of its own (empty, or a copy), so the kept or linked data never
 * changes. */
static int own_file(struct mbfs *fs, struct mbfs_node *n, bool empty)
{
	char *local;
	int fd, rc = new_file(fs, &local, &fd);
	if (!rc && !empty)
		rc = copy_all(fs, n->fd, fd);
	if (rc) {
		if (fd >= 0)
			close(fd);
		mbfs_data_discard(local);
		return rc;
	}
	if (n->local) {   /* a link's name: the other keeps the file */
		mbfs_node_unrecord(fs, n);
		mbfs_data_discard(n->local);
	}
	mbfs_node_set_fd(n, fd);
	n->local = local;
	n->kept_file = false;
	n->linked = false;
	n->in_memory = false;
	return 0;
}

/* n's record as of now; -ENOENT when n wants none (unlinked). */
static int make_rec(struct mbfs *fs, struct mbfs_node *n, struct mbfs_jrec *r)
{
	char path[MB_PATH_MAX];
	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&fs->nodes_lock);
	snprintf(path, sizeof(path), "%s", n->path);
	bool gone = n->unlinked;
	r->fresh = n->fresh;
	r->mode = n->mode;
	r->base_known = n->base_known;
	r->base_size = n->base_size;
	r->base_mtime = n->base_mtime;
	memcpy(r->base_sha, n->base_sha, sizeof(r->base_sha));
	pthread_mutex_unlock(&fs->nodes_lock);
	if (gone)
		return -ENOENT;
	if (mbfs_remote_path(fs, path, r->rpath))
		return -ENAMETOOLONG;
	/* emptied at open (O_TRUNC) without a look at the data: what the
	 * mount knows of the file is what the data replaces */
	struct stat st;
	if (!r->fresh && !r->base_known && mbfs_view_getattr(fs, path, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		r->base_known = true;
		r->base_size = (uint64_t)st.st_size;
		r->base_mtime = st.st_mtim.tv_sec;
	}
	return 0;
}

/* Write n's record (replacing an older one). 0 or -errno. */
static int record(struct mbfs *fs, struct mbfs_node *n)
{
	struct mbfs_jrec r;
	int rc = make_rec(fs, n, &r);
	if (rc == -ENOENT) {
		mbfs_node_unrecord(fs, n);
		return 0;
	}
	while (!rc && (rc = mbfs_journal_put(fs->journal, n->local, &r)) &&
	       mbfs_node_make_room(fs, rc, 0))
		;
	if (rc) {
		mb_log(MB_LOG_WARN, "cannot write the journal record of '%s': %s",
		       r.rpath, strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&fs->nodes_lock);
	n->recorded = true;
	n->rec_stale = false;
	pthread_mutex_unlock(&fs->nodes_lock);
	return 0;
}

/* The hash of a large upload, left for now (node_int.h): the copy still
 * holds what was sent, about to change. Without it, recovery only trusts
 * the guest's file when its mtime is the one noted. */
static void work_out_sha(struct mbfs *fs, struct mbfs_node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool due = n->sha_due;
	uint64_t size = n->base_size;
	n->sha_due = false;
	pthread_mutex_unlock(&fs->nodes_lock);
	char hex[65];
	if (!due || n->fd < 0 || mbfs_xfer_hash_fd(n->fd, size, hex))
		return;
	pthread_mutex_lock(&fs->nodes_lock);
	memcpy(n->base_sha, hex, sizeof(n->base_sha));
	pthread_mutex_unlock(&fs->nodes_lock);
}

static int prepare(struct mbfs *fs, struct mbfs_node *n, bool empty,
		   bool data)
{
	int rc = 0;
	bool made = false;
	work_out_sha(fs, n);
	if (n->fd >= 0 && (n->kept_file || n->in_memory ||
			   (data && n->linked && mbfs_data_shared(n->fd)))) {
		rc = own_file(fs, n, empty);
	} else if (n->fd < 0) {
		if (!empty)
			return 0;   /* nothing loaded, nothing to protect */
		rc = new_file(fs, &n->local, &n->fd);
		made = rc == 0;
	}
	if (rc)
		return rc;
	pthread_mutex_lock(&fs->nodes_lock);
	bool need = !n->recorded || n->rec_stale;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (need)
		rc = record(fs, n);
	if (rc && made) {
		/* back to not loaded: the caller fails and nothing changed */
		mbfs_node_set_fd(n, -1);
		mbfs_data_discard(n->local);
		n->local = NULL;
	}
	return rc;
}

int mbfs_node_will_change(struct mbfs *fs, struct mbfs_node *n, bool empty)
{
	return prepare(fs, n, empty, true);
}

int mbfs_node_will_record(struct mbfs *fs, struct mbfs_node *n)
{
	return prepare(fs, n, false, false);
}

void mbfs_node_unrecord(struct mbfs *fs, struct mbfs_node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool had = n->recorded;
	n->recorded = false;
	n->rec_stale = false;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (had && n->local)
		mbfs_journal_drop(fs->journal, n->local);
}

void mbfs_node_keep(struct mbfs *fs, struct mbfs_node *n, const char *path,
		    uint64_t version, int rc, const struct mb_err *err)
{
	char rpath[MB_PATH_MAX], keptp[PATH_MAX], why[600];
	if (mbfs_remote_path(fs, path, rpath))
		snprintf(rpath, sizeof(rpath), "%s", path);
	snprintf(why, sizeof(why), "the upload failed: %s",
		 err->msg[0] ? err->msg : strerror(-rc));
	char *old = n->local;
	int krc = old ? mbfs_journal_keep(fs->journal, old, rpath, why, keptp,
					  sizeof(keptp)) : -ENOENT;
	if (krc == 0) {
		mbfs_node_unrecord(fs, n);   /* still named after old */
		free(old);
		n->local = NULL;
		n->kept_file = true;
		pthread_mutex_lock(&fs->nodes_lock);
		n->kept_any = true;
		n->kept_version = version;
		pthread_mutex_unlock(&fs->nodes_lock);
		mb_log(MB_LOG_ERR, "upload of '%s' failed: %s; data kept in %s",
		       rpath, why + strlen("the upload failed: "), keptp);
		return;
	}
	/* the data stays where it is, recorded: the next flush tries the
	 * upload again, and a later mount replays it if this one ends */
	pthread_mutex_lock(&fs->nodes_lock);
	bool rec = n->recorded;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!rec && old)
		record(fs, n);
	mb_log(MB_LOG_ERR, "upload of '%s' failed: %s; data kept in %s (in the "
	       "journal: it cannot be moved under kept/: %s); the file stays "
	       "unsaved and is uploaded at the next flush or the next mount",
	       rpath, why + strlen("the upload failed: "), old ? old : "memory",
	       strerror(-krc));
}

bool mbfs_node_settle_record(struct mbfs *fs, struct mbfs_node *n)
{
	/* whoever holds the node (a writer, an upload, a caller of ours)
	 * finds it stale and settles it: never wait here */
	if (pthread_mutex_trylock(&n->lock)) {
		pthread_mutex_lock(&fs->nodes_lock);
		n->rec_stale = n->recorded;
		pthread_mutex_unlock(&fs->nodes_lock);
		return false;
	}
	pthread_mutex_lock(&fs->nodes_lock);
	bool gone = n->unlinked, rec = n->recorded;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (gone)
		mbfs_node_unrecord(fs, n);
	else if (rec && n->local)
		record(fs, n);   /* failing, the old record stays: a replay
		                    keeps the data */
	pthread_mutex_unlock(&n->lock);
	return true;
}
