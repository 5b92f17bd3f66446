/* upload.c: a node's upload (node_int.h), and what the mount knows after
 * it without asking the guest: our bytes, the mode (kept by the PUT, or
 * the one a new file was created with) and its mtime: exactly ours for a
 * batch, our clock's at the end for a PUT. The attribute timeout or an
 * invalidate later brings the guest's own view back.
 *
 * A file created here (fresh) comes into existence on the guest with this
 * upload, with the mode asked for at create or chmod: a file of up to 1 MiB
 * travels as a batch of one (send_small), a larger one in parts that get
 * the mode with their last exec (a new file is 0600 otherwise, then a
 * chmod). A
 * large upload's SHA-256 is left for later (node_int.h, sha_due). A
 * failed upload is an error for close()/fsync();
 * the data is kept under DIR/kept/ and one line names the file (dirty.c).
 * Once the guest has the data, the journal's record goes.
 * Does not decide when to upload (node.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/settle.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/node/node_int.h"
#include "fuse/view/view.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/route.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbsend.h"
#include "fuse/durable/fdio.h"

struct written {
	uint64_t size;
	struct timespec mtime;
};

static void apply_written(struct stat *st, const void *arg)
{
	const struct written *w = arg;
	st->st_size = (off_t)w->size;
	st->st_blocks = (blkcnt_t)((w->size + 511) / 512);
	st->st_mtim = w->mtime;
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

/* A file of up to 1 MiB goes as a batch of one (wbsend.h): its PUT lands
 * in the mount's private staging, and apply.sh places it only when no
 * directory on its way is a symlink, so a directory the sandbox swapped
 * for a link leads nothing out of the mount (a PUT to the path itself
 * would follow it, contract §4.3). mode: a new file's, or 0 for the one
 * it replaces. sha: our bytes' hash. 0 or -errno (logged). */
static int send_small(struct mbfs *fs, struct mbfs_node *n, const char *path,
		      uint64_t size, unsigned mode, struct timespec mtime,
		      char sha[65], bool *conflict, struct mb_err *err)
{
	/* no base check (unlike a queued batch's, wbnode.c): an O_APPEND
	 * writer's bytes over a copy the guest moved on from are merged
	 * there only, and such a copy truncated by path would be refused */
	struct mbfs_wbfile f;
	memset(&f, 0, sizeof(f));
	if (!mode) {
		struct stat st;
		mode = mbfs_view_lookup(fs, path, &st) == 0 &&
		       S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0600;
	}
	f.path = strdup(path);
	f.data = malloc(size ? size : 1);
	f.len = (size_t)size;
	f.mode = mode;
	f.mtime = mtime;
	int rc = f.path && f.data ? mbfs_pread_all(n->fd, f.data, f.len, 0)
				  : -ENOMEM;
	if (rc) {
		mb_err_set(err, -rc, "cannot read the local copy of '%s': %s",
			   path, strerror(-rc));
	} else {
		mb_sha256_hex(f.data, f.len, sha);
		rc = mbfs_wbsend(fs, &f, 1, NULL, 0, err);
		if (!rc && f.rc) {
			rc = f.rc;
			*conflict = strncmp(f.why, "conflict:", 9) == 0;
			if (*conflict)
				mb_err_set(err, -rc, "%s", f.why);
			else
				mb_err_set(err, -rc, "cannot save '%s' on the "
					   "guest: %s", path,
					   f.why[0] ? f.why : strerror(-rc));
			mb_log(MB_LOG_WARN, "%s", err->msg);
		}
	}
	free(f.path);
	free(f.data);
	return rc;
}

/* What an upload of n replaces: nothing (a new file), or the guest's file
 * as n's copy was made from it (a batch's base check, wbnode.c), or any.
 * *ours: that base is our own last upload, whose mtime was our clock's
 * guess (a PUT's). nodes_lock held. */
static void base_of(const struct mbfs_node *n, struct mbfs_wbfile *b,
		    bool *ours)
{
	memset(b, 0, sizeof(*b));
	*ours = n->sha_due || n->base_sha[0];
	if (n->fresh && !n->replaces) {
		b->base = MBFS_BASE_ABSENT;
	} else if (!n->fresh && n->base_known) {
		b->base = MBFS_BASE_STAT;
		b->base_size = n->base_size;
		b->base_mtime = n->base_mtime;
	}
}

/* Is rpath's directory a symlink now (the sandbox swapped it)? The
 * upload itself refuses that, and says why. */
static bool swapped_dir(struct mbfs *fs, const char *rpath)
{
	char dir[MB_PATH_MAX];
	const char *slash = strrchr(rpath, '/');
	if (!slash || slash == rpath)
		return false;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - rpath), rpath);
	struct mb_entry e;
	struct mb_err lerr;
	mb_err_clear(&lerr);
	if (mbfs_route_lstat(fs, dir, &e, &lerr))
		return false;
	bool link = e.type == MB_FT_SYMLINK;
	mb_entry_release(&e);
	return link;
}

/* A large upload checks the guest's file before it starts (its parts go
 * straight in): changed since the copy was made, the upload is a
 * conflict. 0, or -EIO with err said. */
static int check_base(struct mbfs *fs, const char *path,
		      const struct mbfs_wbfile *b, bool ours, struct mb_err *err)
{
	char rpath[MB_PATH_MAX];
	struct mb_entry e;
	struct mb_err lerr;
	if (b->base != MBFS_BASE_STAT || mbfs_remote_path(fs, path, rpath))
		return 0;
	mb_err_clear(&lerr);
	int rc = mbfs_route_lstat(fs, rpath, &e, &lerr);
	if (rc)
		return 0;   /* gone or unknown: the upload says */
	/* after our own upload in parts, its mtime is the guest's clock's:
	 * the size tells */
	bool same = e.type == MB_FT_FILE && e.size == b->base_size &&
		    (ours || e.mtime == b->base_mtime);
	mb_entry_release(&e);
	if (same || swapped_dir(fs, rpath))
		return 0;
	mb_err_set(err, EIO, "conflict: the file changed on the sandbox since "
		   "the mount's copy was made");
	mb_log(MB_LOG_WARN, "'%s': %s", rpath, err->msg);
	return -EIO;
}

int mbfs_node_upload(struct mbfs *fs, struct mbfs_node *n)
{
	char path[MB_PATH_MAX];
	pthread_mutex_lock(&fs->nodes_lock);
	bool dirty = n->dirty && !n->unlinked, fresh = n->fresh;
	uint64_t size = n->size, version = n->version;
	unsigned mode = n->mode;
	bool kept = n->kept_any && n->kept_version == version;
	struct timespec mine = n->mtime;
	snprintf(path, sizeof(path), "%s", n->path);
	struct mbfs_wbfile base;
	bool ours;
	base_of(n, &base, &ours);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!dirty)
		return 0;
	if (kept)
		return -EIO;   /* already failed and kept: no silent retry */
	int rc = mbfs_check_alive(fs);
	/* times queued for the file or its directory land first: the upload
	 * moves both mtimes */
	if (!rc)
		mbfs_outbox_settle(fs, path, MBFS_SETTLE_TIMES |
				   MBFS_SETTLE_TIMES_PARENT | MBFS_SETTLE_CHANGE);
	struct mb_err err;
	mb_err_clear(&err);
	mbfs_data_drop(fs->data, path);
	char sha[65] = "";
	/* a large file's last exec gives it its mode: no chmod after */
	unsigned give = fresh && mode != 0600 ? mode : 0;
	/* a large file's hash is a pass over all of it that recovery needs
	 * only if the copy changes again: worked out then (dirty.c) */
	bool due = size > MBFS_CHUNK;
	/* a batch gives the guest's copy our mtime exactly; a PUT, the
	 * guest's clock at its end (near enough ours) */
	struct written w = { size, { time(NULL), 0 } };
	/* pending until it ends, as a queued file is (wbq.h) */
	mbfs_wbq_upload_begin(fs, size);
	bool conflict = false;
	if (!rc && !due && mbfs_wbsend_fits(path)) {
		w.mtime = mine;
		rc = send_small(fs, n, path, size, fresh ? mode : 0, mine, sha,
				&conflict, &err);
		give = 0;   /* the batch gave it */
	} else if (!rc) {
		rc = check_base(fs, path, &base, ours, &err);
		conflict = rc != 0;
		if (!rc)
			rc = mbfs_xfer_upload(fs, path, n->fd, size, &give,
					      due ? NULL : sha, &err);
	}
	if (rc) {
		mbfs_cache_invalidate(fs->cache, path);
		mbfs_node_keep(fs, n, path, version, rc, &err);
		/* kept: shown so */
		mbfs_wbq_upload_end(fs, size, rc, conflict);
		return rc;
	}
	/* times set while it was waiting for write-back (wbnode.c) follow
	 * the upload, which moved them */
	pthread_mutex_lock(&fs->nodes_lock);
	bool timed = n->times_version == version;
	struct timespec tv[2] = { { 0, UTIME_OMIT }, n->mtime };
	pthread_mutex_unlock(&fs->nodes_lock);
	int mrc = 0;
	if (give) {
		mrc = mbfs_remote_chmod_new(fs, path, mode);
		if (mrc)
			mb_log(MB_LOG_WARN, "cannot give '%s' mode %04o: %s", path,
			       mode, strerror(-mrc));
	}
	pthread_mutex_lock(&fs->nodes_lock);
	mbfs_node_forget_ids(fs, path);
	n->dirty = false;
	n->fresh = false;
	n->base_known = true;
	n->base_size = size;
	n->base_mtime = w.mtime.tv_sec;
	n->overwrote = false;
	memcpy(n->base_sha, sha, sizeof(n->base_sha));
	n->sha_due = due;
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_unrecord(fs, n);   /* the guest has it */
	if (timed)
		mbfs_batch_utimens(fs, path, tv);
	if (fresh && !mrc) {
		struct stat st;
		memset(&st, 0, sizeof(st));
		st.st_mode = S_IFREG | mode;
		st.st_nlink = 1;
		st.st_uid = fs->uid;
		st.st_gid = fs->gid;
		st.st_blksize = 65536;
		apply_written(&st, &w);
		mbfs_cache_put(fs->cache, path, &st);
	} else if (fresh) {
		mbfs_cache_invalidate(fs->cache, path);
	} else {
		mbfs_cache_modify(fs->cache, path, apply_written, &w);
	}
	mbfs_wbq_upload_end(fs, size, 0, false);
	return mrc;
}
