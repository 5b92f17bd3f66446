/* load.c: getting the guest's content into a node's local copy: from
 * the data cache, in one go (xfer.c), or for large files piece by piece as
 * reads need them (with read-ahead). Does not decide sharing or uploads
 * (node.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/api.h"
#include "common/log.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/node/node_int.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/view/view.h"

/* Forget the guest's pieces of a partial node. n->lock held. */
void mbfs_load_drop_pieces(struct mbfs *fs, struct mbfs_node *n)
{
	if (n->pieces.sizes)
		mbfs_xfer_pieces_release(fs, &n->pieces);
	free(n->have);
	n->have = NULL;
	n->missing = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	n->partial = false;
	pthread_mutex_unlock(&fs->nodes_lock);
}

/* Pieces [first, need] from the fetch running in the background (a
 * sequential reader's), waiting for those on their way; a sequential
 * reader's read-ahead then moves on with it. true when every one is in;
 * else that fetch is ended (what it brought counted), and the caller
 * fetches the rest. n->lock held. */
static bool from_running(struct mbfs *fs, struct mbfs_node *n, size_t first,
			 size_t need, bool seq)
{
	struct mbfs_pieces *p = &n->pieces;
	bool all = true;
	for (size_t i = first; i <= need && all; i++) {
		if (n->have[i])
			continue;
		all = mbfs_xfer_fetch_wait(p, i);
		if (all) {
			n->have[i] = 1;
			n->missing--;
		}
	}
	if (all) {
		if (seq)
			mbfs_xfer_fetch_grow(p, need + SEQ_AHEAD, SEQ_MAX + 1);
		return true;
	}
	/* this read's time is up (bound.c): it does not wait for the fetch
	 * to end (the next one that needs it does) */
	if (mb_op_expired()) {
		mbfs_xfer_fetch_stop(p);
		return false;
	}
	size_t got = 0;
	struct mb_err err;
	mb_err_clear(&err);
	if (mbfs_xfer_fetch_end(fs, p, n->have, &got, &err))
		mb_log(MB_LOG_DEBUG, "reading ahead in '%s' failed: %s",
		       p->dir, err.msg);
	n->missing -= got;
	return false;
}

/* Fetch the missing pieces overlapping [off, off + len) plus READ_AHEAD
 * more, or SEQ_AHEAD more when the read goes on from where the last one
 * ended (len 0: all); a sequential reader's (or one at the start) go on
 * in the background while it reads (mbfs_xfer_fetch_start). n->lock
 * held. */
static int load_range(struct mbfs *fs, struct mbfs_node *n,
		      struct mbfs_pieces *p, uint64_t off, uint64_t len);

int mbfs_load_range(struct mbfs *fs, struct mbfs_node *n, uint64_t off,
		       uint64_t len)
{
	struct mbfs_pieces *p = &n->pieces;
	if (!p->sizes || !n->have)
		return 0;
	return load_range(fs, n, p, off, len);
}

static int load_range(struct mbfs *fs, struct mbfs_node *n,
		      struct mbfs_pieces *p, uint64_t off, uint64_t len)
{
	size_t first = len ? (size_t)(off / MBFS_CHUNK) : 0;
	if (first >= p->n)
		return 0;
	/* a sequential reader's fetch goes on in the background, SEQ_AHEAD
	 * pieces ahead of its reads: its GETs never pause at the end of a
	 * window, and one that stops reading leaves few GETs going on */
	bool seq = first > 0 && n->have[first - 1];
	int rc = 0;
	if (p->fetch) {
		size_t upto = len ? (size_t)((off + len - 1) / MBFS_CHUNK) :
				    p->n - 1;
		if (from_running(fs, n, first, upto < p->n ? upto : p->n - 1,
				 seq))
			goto whole;
		if (mb_op_expired())
			return -ETIMEDOUT;
	}
	size_t last = len ? (size_t)((off + len - 1) / MBFS_CHUNK) +
			    (seq ? SEQ_AHEAD : READ_AHEAD)
			  : p->n;
	if (last >= p->n)
		last = p->n ? p->n - 1 : 0;
	size_t *idx = malloc((last - first + 1) * sizeof(*idx)), count = 0;
	if (!idx)
		return -ENOMEM;
	size_t need = len ? (size_t)((off + len - 1) / MBFS_CHUNK) : last;
	bool needed = false;
	for (size_t i = first; i <= last && i < p->n; i++)
		if (!n->have[i]) {
			idx[count++] = i;
			needed = needed || i <= need;
		}
	/* what the read needs is here: the pieces ahead come with the next
	 * read that needs one, many at a time rather than one per read */
	if (!needed)
		count = 0;
	if (count) {
		struct mb_err err;
		/* a sequential reader (or one at the start, as most are)
		 * comes for the next pieces soon: they are cut on the guest
		 * while these are fetched, up to SEQ_MAX + 1 ahead; it reads
		 * the first while the others come */
		size_t ahead = seq || first == 0 ? SEQ_MAX + 1 : 0;
		size_t want = 0;
		while (want < count && idx[want] <= need)
			want++;
		if (len && ahead) {
			rc = mbfs_xfer_fetch_start(fs, p, idx, count, ahead,
						   want, n->fd, &err);
			if (rc)
				mb_log(MB_LOG_DEBUG, "reading ahead in '%s' "
				       "failed: %s", p->dir, err.msg);
			for (size_t k = 0; !rc && k < want; k++)
				n->have[idx[k]] = 1;
			if (!rc)
				n->missing -= want;
			/* timed out: the operation's time is up, no second try */
			count = rc && rc != -ETIMEDOUT ? count : 0;
		}
		if (count)
			rc = mbfs_xfer_fetch(fs, p, idx, count, ahead, n->fd,
					     &err);
		/* a full cache disk: clean copies go, then once more */
		if (rc && mbfs_node_make_room(fs, rc, (uint64_t)count * MBFS_CHUNK))
			rc = mbfs_xfer_fetch(fs, p, idx, count, ahead, n->fd,
					     &err);
		if (rc)
			mb_log(MB_LOG_WARN, "cannot read a piece of '%s': %s",
			       p->dir, err.msg[0] ? err.msg : strerror(-rc));
		for (size_t k = 0; !rc && k < count; k++)
			n->have[idx[k]] = 1;
		if (!rc)
			n->missing -= count;
	}
	free(idx);
whole:
	/* every piece is in: the copy is whole. The guest's directory (the
	 * pieces of the last rounds) goes when the last user closes the file
	 * (mbfs_node_release), off the reader's way */
	if (!rc && n->missing == 0) {
		mbfs_xfer_fetch_end(fs, p, NULL, NULL, NULL);   /* done */
		free(n->have);
		n->have = NULL;
		pthread_mutex_lock(&fs->nodes_lock);
		n->partial = false;
		pthread_mutex_unlock(&fs->nodes_lock);
	}
	return rc;
}

/* Give n an empty local copy. n->lock held. */
int mbfs_load_empty(struct mbfs *fs, struct mbfs_node *n)
{
	mbfs_load_drop_pieces(fs, n);
	if (n->fd < 0) {
		int rc = mbfs_data_newfile(fs->data, &n->local, &n->fd);
		if (rc)
			return rc;
	} else if (ftruncate(n->fd, 0)) {
		return -errno;
	}
	pthread_mutex_lock(&fs->nodes_lock);
	n->loaded = true;
	pthread_mutex_unlock(&fs->nodes_lock);
	return 0;
}

/* One line for a failed read of path: err's message when it names the
 * file already ("cannot read '/workspace/x': ..."), else with that
 * prefix, so a message is never prefixed twice nor left without a name. */
static void say_failed(const char *path, int rc, const struct mb_err *err)
{
	if (strncmp(err->msg, "cannot read '", 13) == 0)
		mb_log(MB_LOG_WARN, "%s", err->msg);
	else
		mb_log(MB_LOG_WARN, "cannot read '%s': %s", path,
		       err->msg[0] ? err->msg : strerror(-rc));
}

/* Start cutting a large file on the guest and size the local copy;
 * pieces come as they are read. n->lock held. */
static int load_lazy(struct mbfs *fs, struct mbfs_node *n, const char *path,
		     uint64_t *got)
{
	struct mb_err err;
	int rc = mbfs_xfer_split(fs, path, &n->pieces, &err);
	if (rc) {
		say_failed(path, rc, &err);
		return rc;
	}
	n->have = calloc(n->pieces.n ? n->pieces.n : 1, 1);
	if (!n->have || ftruncate(n->fd, (off_t)n->pieces.total)) {
		rc = n->have ? -errno : -ENOMEM;
		mbfs_load_drop_pieces(fs, n);
		return rc;
	}
	n->missing = n->pieces.n;
	*got = n->pieces.total;
	pthread_mutex_lock(&fs->nodes_lock);
	n->partial = n->missing > 0;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!n->missing)
		mbfs_load_drop_pieces(fs, n);
	return 0;
}

/* got bytes came for path, whose attributes said st->st_size. The file
 * may have changed on the guest since they were cached: one stat tells;
 * when it agrees with got, *st takes the new attributes. Otherwise what
 * came is not the file (a proxy, a broken transfer): -EIO, as for a piece
 * of a large file. */
static int check_size(struct mbfs *fs, const char *path, uint64_t got,
		      struct stat *st, struct mb_err *err)
{
	struct stat now;
	int rc = mbfs_cache_refresh(fs, path, &now);
	if (rc == 0 && (uint64_t)now.st_size == got) {
		*st = now;
		return 0;
	}
	return mb_err_set(err, EIO, "%" PRIu64 " bytes came for a file of %"
			  PRIu64 " bytes", got, (uint64_t)(rc == 0 ? now.st_size
							   : st->st_size));
}

/* Fetch the guest's content unless loaded; whole: also every piece still
 * missing of a partial copy. n->lock held. */
int mbfs_load(struct mbfs *fs, struct mbfs_node *n, bool whole)
{
	char path[MB_PATH_MAX];
	pthread_mutex_lock(&fs->nodes_lock);
	bool loaded = n->loaded, gone = n->unlinked, partial = n->partial;
	snprintf(path, sizeof(path), "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (loaded)
		return whole && partial ? mbfs_load_range(fs, n, 0, 0) : 0;
	if (gone)
		return -ENOENT;
	struct stat st;
	/* with our queued times: they land before this copy does, so they
	 * are part of the base it is made on */
	int rc = mbfs_view_getattr(fs, path, &st);
	if (rc)
		return rc;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	uint64_t got = 0;
	/* no clean copy: perhaps one comes with its directory's (prefetch.h) */
	int mfd = -1;
	if (mbfs_data_take(fs->data, path, (uint64_t)st.st_size,
			   st.st_mtim.tv_sec, &n->local, &mfd) ||
	    (mbfs_prefetch_miss(fs, path, (uint64_t)st.st_size) &&
	     mbfs_data_take(fs->data, path, (uint64_t)st.st_size,
			    st.st_mtim.tv_sec, &n->local, &mfd))) {
		n->in_memory = !n->local;
		n->fd = n->local ? open(n->local, O_RDWR | O_CLOEXEC) : mfd;
		got = (uint64_t)st.st_size;
		if (n->fd < 0) {
			mbfs_data_discard(n->local);
			n->local = NULL;
		}
	}
	for (int tries = 0; n->fd < 0; tries++) {
		struct mb_err err;
		mb_err_clear(&err);
		rc = mbfs_data_newfile(fs->data, &n->local, &n->fd);
		if (!rc && (uint64_t)st.st_size >= LAZY_MIN && !whole)
			rc = load_lazy(fs, n, path, &got);
		else if (!rc)
			rc = mbfs_xfer_download(fs, path, (uint64_t)st.st_size,
						n->fd, &got, &err);
		if (!rc && got != (uint64_t)st.st_size)
			rc = check_size(fs, path, got, &st, &err);
		/* a full cache disk: clean copies go, then once more */
		bool again = rc && tries == 0 &&
			     mbfs_node_make_room(fs, rc, (uint64_t)st.st_size);
		if (rc && again) {
			mbfs_node_set_fd(n, -1);
			mbfs_data_discard(n->local);
			n->local = NULL;
			mbfs_load_drop_pieces(fs, n);
			continue;
		}
		if (rc) {
			say_failed(path, rc, &err);
			mbfs_node_set_fd(n, -1);
			mbfs_data_discard(n->local);
			n->local = NULL;
			return rc;
		}
	}
	pthread_mutex_lock(&fs->nodes_lock);
	n->loaded = true;
	n->size = got;
	n->base_known = got == (uint64_t)st.st_size;
	n->base_size = got;
	n->base_mtime = st.st_mtim.tv_sec;
	n->overwrote = false;
	n->sha_due = false;
	pthread_mutex_unlock(&fs->nodes_lock);
	return 0;
}

