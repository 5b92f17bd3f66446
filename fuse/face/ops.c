/* ops.c: the path operations ll.c answers the kernel with, a thin
 * translation to the modules: attributes, listings and open files here,
 * the namespace operations in ops_name.c.
 *
 * Every op returns 0 (or a count) or -errno and never exits. File handles
 * (fi->fh) hold a struct mbfs_node *, or for the control file a handle
 * with its low bit set (control.h). Once the generation is gone every op
 * but the control file fails with ENOTCONN.
 * ownership cannot be changed through the API, and every file shows as the
 * mounting user: chown is accepted and ignored, so tar/rsync/cp -a running
 * as root do not fail on it. st_ino is mbfs_ino() of the path.
 * The kernel caches names, attributes and pages (init); every path whose
 * attributes it is given is told to kcache.c, which invalidates them.
 * What it may skip for an open file (its flush) is warm.c's choice.
 * xattrs have no route: the ops are left out, so that libfuse answers
 * ENOSYS and the kernel stops asking (it then says EOPNOTSUPP itself, as
 * it did for our ENOTSUP); it would otherwise ask for security.capability
 * before every write.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "fuse/mbfs.h"

#include <fuse.h>

#include "common/log.h"
#include "fuse/face/agent.h"
#include "fuse/outbox/batch.h"
#include "fuse/cache/cache.h"
#include "fuse/face/control.h"
#include "fuse/ns/hidden.h"
#include "fuse/cache/kcache.h"
#include "fuse/session/lease.h"
#include "fuse/transport/name.h"
#include "fuse/transport/route.h"
#include "fuse/node/node.h"
#include "fuse/face/follow.h"
#include "fuse/face/ll.h"
#include "fuse/face/ops.h"
#include "fuse/face/ops_int.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/bulk/relist.h"
#include "fuse/transport/remote.h"
#include "fuse/outbox/unsent.h"
#include "fuse/view/view.h"
#include "fuse/face/warm.h"
#include "fuse/outbox/wbq.h"

const char *mbfs_op_path(const char *path, struct fuse_file_info *fi,
			 char *buf)
{
	if (path)
		return path;
	if (NODE_OF(fi) && mbfs_node_get_path(FS, NODE(fi), buf) == 0)
		return buf;
	return NULL;
}

static void *mbfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* the kernel keeps what the daemon's cache would answer, as long as
	 * the daemon would (a name: while both its attributes and its
	 * listing would be fresh), and is told of every change the mount
	 * learns of (kcache.h). Negative entries are kept as long as the
	 * daemon's own only when the kernel can be told to drop them (protocol
	 * 7.44's epoch; kcache.h): `git status` looks for a dozen missing
	 * files under .git again and again. Pages are kept across
	 * opens while the size and mtime stay (auto_cache, checked at open,
	 * and the kernel's own check whenever it refreshes attributes) */
	uint64_t entry_ms = FS->attr_ms < FS->dir_ms ? FS->attr_ms : FS->dir_ms;
	cfg->entry_timeout = (double)entry_ms / 1000.0;
	cfg->attr_timeout = (double)FS->attr_ms / 1000.0;
	cfg->ac_attr_timeout = cfg->attr_timeout;
	cfg->ac_attr_timeout_set = 1;
	cfg->negative_timeout = 0;
	if (conn->proto_minor >= 44 && FS->neg_ms) {
		cfg->negative_timeout = (double)FS->neg_ms / 1000.0;
		mbfs_kcache_use_epochs(FS->kcache, FS->neg_ms);
	}
	cfg->kernel_cache = 0;
	cfg->auto_cache = FS->attr_ms > 0;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* a link's target is kept like a file's pages (readlink costs a
	 * request to the service) and dropped with them (kcache.h) */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* ll.c takes st_ino as given, passes no path with a handle, and
	 * hides a file unlinked or replaced while open (hidden.h) */
	/* before the control file, which names its socket */
	int arc = mbfs_agent_start(FS, &FS->agent, FS->agent_name,
				   sizeof(FS->agent_name));
	if (arc)
		mb_log(MB_LOG_WARN, "cannot offer mbexec a socket (%s): each "
		       "command polls by itself", strerror(-arc));
	if (mbfs_control_init(FS))
		mb_log(MB_LOG_ERR, "cannot build the control file");
	/* a thread now: libfuse calls init after daemonising */
	int rc = mbfs_batch_start(FS);
	if (rc)
		mb_log(MB_LOG_WARN, "cannot start the batch thread (%s): file "
		       "times are set one by one", strerror(-rc));
	rc = mbfs_lease_start(FS);
	if (rc)
		mb_log(MB_LOG_WARN, "cannot start the keep-alive thread (%s): "
		       "an idle mount may lose its container", strerror(-rc));
	static const struct mbfs_kernel kernel = {
		mbfs_ll_invalidate_path, mbfs_ll_notify_raw,
		mbfs_ll_invalidate_name
	};
	rc = mbfs_kcache_start(FS->kcache, &kernel);
	if (rc)
		mb_log(MB_LOG_WARN, "cannot start the kernel cache thread (%s): "
		       "changes show once the kernel's timeouts expire",
		       strerror(-rc));
	if (FS->agent && (rc = mbfs_follow_start(FS, &FS->follow)))
		mb_log(MB_LOG_WARN, "cannot start the thread that follows open "
		       "files (%s): they follow at each command's end",
		       strerror(-rc));
	/* the log says when a session began and ended */
	mb_log(MB_LOG_INFO, "mounted %s@%s:%s on '%s' (pid %ld)", FS->ident.id,
	       FS->ident.created_at, FS->root[0] ? FS->root : "/",
	       FS->mountpoint, (long)getpid());
	return FS;
}

static void mbfs_destroy(void *data)
{
	(void)data;
	mbfs_follow_stop(FS->follow);   /* it asks the agent */
	FS->follow = NULL;
	mbfs_agent_stop(FS->agent);
	FS->agent = NULL;
	mbfs_kcache_stop(FS->kcache);
	mbfs_lease_stop(FS);
	mbfs_hidden_stop(FS);
	mbfs_wbq_stop(FS);   /* queued files go first; later closes upload */
	mbfs_prefetch_stop(FS);
	mbfs_node_flush_all(FS);
	mbfs_batch_stop(FS);
	mbfs_unsent_save(FS);   /* told at the next contact (unsent.h) */
	mb_log(MB_LOG_INFO, "unmounted '%s'", FS->mountpoint);
}

static void default_file_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	st->st_uid = FS->uid;
	st->st_gid = FS->gid;
}

/* A directory the cache has no listing of, about to be listed: a walk's
 * subtree in one go (prefetch.h), else this one through the guest, with
 * its times to the nanosecond (relist.h); the list route when neither
 * could. */
static void list_cold(const char *dir, bool readdir)
{
	mbfs_prefetch_listing(FS, dir, readdir);
	/* dir_timeout=0 keeps no listing: the list route's is the one */
	if (FS->dir_ms && !mbfs_cache_listed(FS->cache, dir))
		mbfs_relist_cold(FS, dir);
}

static int mbfs_getattr(const char *path, struct stat *st,
			struct fuse_file_info *fi)
{
	if (mbfs_is_control(path)) {
		mbfs_control_stat(FS, st);
		return 0;
	}
	mbfs_warm_count(FS->warm, MBFS_OP_GETATTR);
	if (NODE_OF(fi)) {
		char buf[MB_PATH_MAX];
		if (mbfs_node_stat_new(FS, NODE(fi), NULL, st))
			return 0;
		bool gone = mbfs_node_get_path(FS, NODE(fi), buf) != 0;
		/* a hidden node keeps the path it had (names.c) */
		if (gone && mbfs_hidden_getattr_node(FS, NODE(fi), st))
			return 0;
		if (gone || mbfs_view_getattr(FS, buf, st))
			default_file_stat(st);
		mbfs_node_fgetattr(FS, NODE(fi), st);
		st->st_ino = (ino_t)mbfs_ino(FS, buf);
		if (!gone)
			mbfs_kcache_seen(FS->kcache, buf, st->st_mode);
		return 0;
	}
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check(path);   /* before any request */
	if (!rc && (rc = mbfs_hidden_getattr(FS, path, st)) == 1)
		return 0;
	if (!rc && mbfs_node_stat_new(FS, NULL, path, st)) {
		mbfs_kcache_seen(FS->kcache, path, st->st_mode);
		return 0;
	}
	if (!rc && mbfs_cache_lists_for(FS->cache, path)) {
		char dir[MB_PATH_MAX + 2];
		mbfs_parent_path(path, dir);
		/* after a command: what was listed, in one go; else this
		 * one's listing answers git's lstats, make's stats */
		if (!mbfs_relist_listing(FS, dir) && !mbfs_view_made_here(FS, dir))
			list_cold(dir, false);
	} else if (!rc && mbfs_cache_stats_for(FS->cache, path)) {
		mbfs_relist_listing(FS, path);   /* the root's own */
	}
	if (!rc) {
		rc = mbfs_view_getattr(FS, path, st);
		/* gone while the kernel may still hold the name: it looks
		 * the name up again (kcache.h) */
		if (rc == -ENOENT && mbfs_kcache_gone(FS->kcache, path))
			rc = -ESTALE;
		else if (rc == -ENOENT)   /* a lookup: a negative entry */
			mbfs_kcache_missing(FS->kcache, path);
	}
	if (rc && strcmp(path, "/") == 0) {
		/* keep the mountpoint stat-able (stopped generation, dead
		 * service) so it can be found and unmounted */
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 1;
		st->st_uid = FS->uid;
		st->st_gid = FS->gid;
		st->st_ino = 1;
		return 0;
	}
	if (!rc && S_ISREG(st->st_mode))
		mbfs_node_getattr(FS, path, st);
	if (!rc)   /* a directory's queued time and mode, a file's mode */
		mbfs_wbq_apply_dir_time(FS, path, st);
	if (!rc) {
		st->st_ino = (ino_t)mbfs_ino(FS, path);
		if (mbfs_kcache_seen(FS->kcache, path, st->st_mode))
			rc = -ESTALE;
	}
	return rc;
}

static int mbfs_readlink(const char *path, char *buf, size_t size)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_remote_path(FS, path, rpath);
	if (rc)
		return rc;
	struct mb_entry e;
	struct mb_err err;
	mb_err_clear(&err);
	rc = mbfs_route_lstat(FS, rpath, &e, &err);
	if (rc)
		return mbfs_fail(FS, rc, &err);
	if (e.type != MB_FT_SYMLINK || !e.link_target)
		rc = -EINVAL;
	else if (size > 0)
		snprintf(buf, size, "%s", e.link_target);
	mb_entry_release(&e);
	return rc;
}

struct dirfill {
	void *buf;
	fuse_fill_dir_t filler;
	const char *dir;
	bool root;
	struct mbfs_dirent *fresh;   /* files created here, not yet uploaded */
	size_t nfresh;
};

static int fill(struct dirfill *d, const char *name, const struct stat *st)
{
	char path[MB_PATH_MAX];
	struct stat s = *st;
	if (snprintf(path, sizeof(path), "%s/%s", d->root ? "" : d->dir, name)
	    < (int)sizeof(path)) {
		if (mbfs_hidden_pending(FS, path))
			return 0;   /* removed here while open */
		mbfs_batch_apply(FS, path, &s);
		mbfs_wbq_apply_dir_time(FS, path, &s);
		s.st_ino = (ino_t)mbfs_ino(FS, path);
		mbfs_kcache_seen(FS->kcache, path, s.st_mode);   /* readdirplus */
	}
	return d->filler(d->buf, name, &s, 0, FUSE_FILL_DIR_PLUS);
}

static int fill_one(void *ud, const char *name, const struct stat *st)
{
	struct dirfill *d = ud;
	for (size_t i = 0; i < d->nfresh; i++)
		if (strcmp(d->fresh[i].name, name) == 0)
			return 0;   /* shown from the node */
	char path[MB_PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", d->root ? "" : d->dir, name)
	    < (int)sizeof(path) && mbfs_view_gone(FS, path))
		return 0;   /* removed here, the removal on its way */
	return fill(d, name, st);
}

/* readdir gets no path (nullpath_ok): opendir keeps a copy in fi->fh. */
static int mbfs_opendir(const char *path, struct fuse_file_info *fi)
{
	int rc = mbfs_check_alive(FS);
	if (rc)
		return rc;
	mbfs_warm_count(FS->warm, MBFS_OP_OPENDIR);
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fi->fh = (uintptr_t)copy;
	return 0;
}

static int mbfs_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	mbfs_warm_count(FS->warm, MBFS_OP_RELEASEDIR);
	free((char *)(uintptr_t)fi->fh);
	return 0;
}

static int mbfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
			off_t off, struct fuse_file_info *fi,
			enum fuse_readdir_flags flags)
{
	(void)off; (void)flags;
	int rc = mbfs_check_alive(FS);
	if (rc)
		return rc;
	if (!path)
		path = (const char *)(uintptr_t)fi->fh;
	mbfs_warm_count(FS->warm, MBFS_OP_READDIR);
	struct dirfill d = { buf, filler, path, strcmp(path, "/") == 0, NULL, 0 };
	rc = mbfs_node_list_new(FS, path, &d.fresh, &d.nfresh);
	if (rc)
		return rc;
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	for (size_t i = 0; i < d.nfresh; i++)
		fill(&d, d.fresh[i].name, &d.fresh[i].st);
	/* after a command, what was listed comes in one go; a walk lists
	 * its subtree */
	if (!mbfs_cache_listed(FS->cache, path) && !mbfs_relist_listing(FS, path) &&
	    !mbfs_view_made_here(FS, path))
		list_cold(path, true);
	rc = mbfs_view_readdir(FS, path, fill_one, &d);
	if (rc == -EILSEQ) {   /* a name not UTF-8: a bulk listing drops it */
		mbfs_prefetch_listing_now(FS, path);
		rc = mbfs_view_readdir(FS, path, fill_one, &d);
	}
	mbfs_dirents_free(d.fresh, d.nfresh);
	return rc;
}

static int mbfs_open(const char *path, struct fuse_file_info *fi)
{
	if (mbfs_is_control(path)) {
		int rc = mbfs_control_access(mbfs_ll_uid());
		if (rc)
			return rc;
		fi->fh = mbfs_control_open(FS, fi->flags);
		fi->direct_io = 1;
		return 0;
	}
	mbfs_warm_count(FS->warm, MBFS_OP_OPEN);
	int rc = mbfs_check_alive(FS);
	struct mbfs_node *n = NULL;
	if (!rc)
		rc = mbfs_hidden_open(FS, path, fi->flags, &n);
	if (rc == 0 && (fi->flags & O_ACCMODE) != O_RDONLY)
		mbfs_wbq_room(FS);   /* an fd a queued file */
	if (rc == 0)   /* not a hidden name */
		rc = mbfs_node_open(FS, path, fi->flags, &n);
	else if (rc == 1)
		rc = 0;
	if (!rc) {
		fi->fh = (uintptr_t)n;
		mbfs_node_handle(FS, n, 1);
		mbfs_warm_open(FS, fi->flags, fi);
	}
	return rc;
}

static int mbfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (mbfs_is_control(path))
		return mbfs_open(path, fi);
	int rc = mbfs_check_alive(FS);
	struct mbfs_node *n = NULL;
	if (!rc)
		rc = mbfs_name_check_new(path);
	if (!rc) {
		mbfs_hidden_settle(FS, NULL);
		mbfs_wbq_room(FS);   /* an fd a queued file */
		rc = mbfs_node_create(FS, path, mode & 07777, fi->flags, &n);
	}
	if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = mbfs_node_open(FS, path, fi->flags, &n);
	if (!rc) {
		fi->fh = (uintptr_t)n;
		mbfs_node_handle(FS, n, 1);
	}
	return rc;
}

static int mbfs_read(const char *path, char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)path;
	if (CONTROL(fi))
		return mbfs_control_read(FS, fi->fh, buf, size, off);
	mbfs_warm_count(FS->warm, MBFS_OP_READ);
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_node_read(FS, NODE(fi), buf, size, off);
	char p[MB_PATH_MAX];
	/* an open older than the path's content (the mount learned of a
	 * change while it stayed open) just put its bytes in the kernel's
	 * pages, which newer opens share: they are stale for those */
	if (rc > 0 && mbfs_node_superseded(FS, NODE(fi), p))
		mbfs_kcache_stale(FS->kcache, p);
	return rc;
}

static int mbfs_write(const char *path, const char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	(void)path;
	if (CONTROL(fi))
		return mbfs_control_write(FS, buf, size);
	int rc = mbfs_check_alive(FS);
	return rc ? rc : mbfs_node_write(FS, NODE(fi), buf, size, off,
					 (fi->flags & O_APPEND) != 0);
}

static int mbfs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	int rc = mbfs_check_alive(FS);
	return rc ? rc : mbfs_remote_statfs(FS, st);
}

static int mbfs_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (CONTROL(fi))
		return 0;
	mbfs_warm_count(FS->warm, MBFS_OP_FLUSH);
	return mbfs_node_close(FS, NODE(fi));
}

static int mbfs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (CONTROL(fi)) {
		mbfs_control_release(fi->fh);
	} else if (fi->fh) {
		mbfs_warm_count(FS->warm, MBFS_OP_RELEASE);
		mbfs_node_handle(FS, NODE(fi), -1);
		mbfs_node_release(FS, NODE(fi));
	}
	return 0;
}

static int mbfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)path;
	if (CONTROL(fi))
		return 0;
	return mbfs_node_flush(FS, NODE(fi));
}

/* fsync of a directory (`sync DIR`): everything queued lands first. */
static int mbfs_fsyncdir(const char *path, int datasync,
			 struct fuse_file_info *fi)
{
	(void)path; (void)datasync; (void)fi;
	return mbfs_wbq_sync(FS);
}

/* Our files are local cache files or memory: always ready. The poll
 * handle is freed here: nothing will be notified on it. */
static int mbfs_poll(const char *path, struct fuse_file_info *fi,
		     struct fuse_pollhandle *ph, unsigned *reventsp)
{
	(void)path;
	if (ph)
		fuse_pollhandle_destroy(ph);
	*reventsp |= fi->poll_events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
	return 0;
}

bool mbfs_ops_hold(uint64_t fh)
{
	struct fuse_file_info fi = { .fh = fh };
	if (!fh || CONTROL(&fi))
		return false;
	mbfs_node_ref(FS, NODE(&fi));
	return true;
}

void mbfs_ops_drop(uint64_t fh)
{
	struct fuse_file_info fi = { .fh = fh };
	if (fh && !CONTROL(&fi))
		mbfs_node_release(FS, NODE(&fi));
}

const struct fuse_operations mbfs_ops = {
	.init        = mbfs_init,
	.destroy     = mbfs_destroy,
	.getattr     = mbfs_getattr,
	.readlink    = mbfs_readlink,
	.opendir     = mbfs_opendir,
	.readdir     = mbfs_readdir,
	.releasedir  = mbfs_releasedir,
	.mknod       = mbfs_mknod,
	.mkdir       = mbfs_mkdir,
	.unlink      = mbfs_unlink,
	.rmdir       = mbfs_rmdir,
	.symlink     = mbfs_symlink,
	.rename      = mbfs_rename,
	.link        = mbfs_link,
	.chmod       = mbfs_chmod,
	.chown       = mbfs_chown,
	.truncate    = mbfs_truncate,
	.open        = mbfs_open,
	.create      = mbfs_create,
	.read        = mbfs_read,
	.write       = mbfs_write,
	.statfs      = mbfs_statfs,
	.flush       = mbfs_flush,
	.release     = mbfs_release,
	.fsync       = mbfs_fsync,
	.fsyncdir    = mbfs_fsyncdir,
	.utimens     = mbfs_utimens,
	.poll        = mbfs_poll,
};
