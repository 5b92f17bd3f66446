/* ops.c: the FUSE operations table, a thin translation to the modules.
 *
 * Every op returns 0 (or a count) or -errno and never exits. File handles
 * (fi->fh) hold a struct mbfs_node *, or 0 for the control file. Once the
 * generation is gone every op but the control file fails with ENOTCONN.
 * ownership cannot be changed through the API, and every file shows as the
 * mounting user: chown is accepted and ignored, so tar/rsync/cp -a running
 * as root do not fail on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/mbfs.h"

#include <fuse.h>

#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/control.h"
#include "fuse/node.h"
#include "fuse/ns.h"
#include "fuse/ops.h"
#include "fuse/remote.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define FS mbfs_fs
#define NODE(fi) ((struct mbfs_node *)(uintptr_t)(fi)->fh)

/* The path of an op that may come with a handle only (nullpath_ok):
 * the node's current path, copied into buf. NULL when unlinked. */
static const char *op_path(const char *path, struct fuse_file_info *fi,
			   char *buf)
{
	if (path)
		return path;
	if (fi && fi->fh && mbfs_node_get_path(FS, NODE(fi), buf) == 0)
		return buf;
	return NULL;
}

static void *mbfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/* all caching lives in the daemon, where it can be invalidated */
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->kernel_cache = 0;
	cfg->auto_cache = 0;
	cfg->use_ino = 0;
	cfg->nullpath_ok = 1;
	cfg->hard_remove = 1;
	cfg->set_uid = 0;
	cfg->set_gid = 0;
	if (mbfs_control_init(FS))
		mb_log(MB_LOG_ERR, "cannot build the control file");
	return FS;
}

static void mbfs_destroy(void *data)
{
	(void)data;
	mbfs_node_flush_all(FS);
}

static int mbfs_getattr(const char *path, struct stat *st,
			struct fuse_file_info *fi)
{
	if (mbfs_is_control(path)) {
		mbfs_control_stat(FS, st);
		return 0;
	}
	if (fi && fi->fh) {
		char buf[MB_PATH_MAX];
		path = op_path(path, fi, buf);
		if (!path || mbfs_cache_getattr(FS, path, st)) {
			memset(st, 0, sizeof(*st));
			st->st_mode = S_IFREG | 0600;
			st->st_nlink = 1;
			st->st_uid = FS->uid;
			st->st_gid = FS->gid;
		}
		mbfs_node_fgetattr(FS, NODE(fi), st);
		return 0;
	}
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_cache_getattr(FS, path, st);
	if (rc && strcmp(path, "/") == 0) {
		/* keep the mountpoint stat-able (stopped generation, dead
		 * service) so it can be found and unmounted */
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 1;
		st->st_uid = FS->uid;
		st->st_gid = FS->gid;
		return 0;
	}
	if (!rc && S_ISREG(st->st_mode))
		mbfs_node_getattr(FS, path, st);
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
	rc = mb_fs_stat(FS->client, &FS->ident, rpath, false, &e, &err);
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
	bool root;
};

static int fill_one(void *ud, const char *name, const struct stat *st)
{
	struct dirfill *d = ud;
	if (d->root && strcmp(name, MB_CONTROL_NAME) == 0)
		return 0;
	return d->filler(d->buf, name, st, 0, FUSE_FILL_DIR_PLUS);
}

/* readdir gets no path (nullpath_ok): opendir keeps a copy in fi->fh. */
static int mbfs_opendir(const char *path, struct fuse_file_info *fi)
{
	int rc = mbfs_check_alive(FS);
	if (rc)
		return rc;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fi->fh = (uintptr_t)copy;
	return 0;
}

static int mbfs_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
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
	struct dirfill d = { buf, filler, strcmp(path, "/") == 0 };
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	return mbfs_cache_readdir(FS, path, fill_one, &d);
}

static int mbfs_mkdir(const char *path, mode_t mode)
{
	int rc = mbfs_check_alive(FS);
	if (!rc && mbfs_is_control(path))
		rc = -EEXIST;
	return rc ? rc : mbfs_ns_mkdir(FS, path, mode);
}

static int mbfs_unlink(const char *path)
{
	int rc = mbfs_check_alive(FS);
	if (!rc && mbfs_is_control(path))
		rc = -EPERM;
	return rc ? rc : mbfs_ns_unlink(FS, path);
}

static int mbfs_rmdir(const char *path)
{
	int rc = mbfs_check_alive(FS);
	return rc ? rc : mbfs_ns_rmdir(FS, path);
}

static int mbfs_symlink(const char *target, const char *path)
{
	int rc = mbfs_check_alive(FS);
	if (!rc && mbfs_is_control(path))
		rc = -EEXIST;
	if (!rc)
		rc = mbfs_remote_symlink(FS, target, path);
	mbfs_cache_invalidate(FS->cache, path);
	return rc;
}

static int mbfs_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;   /* RENAME_EXCHANGE has no atomic equivalent */
	int rc = mbfs_check_alive(FS);
	if (!rc && (mbfs_is_control(from) || mbfs_is_control(to)))
		rc = -EBUSY;
	return rc ? rc : mbfs_ns_rename(FS, from, to, flags);
}

static int mbfs_link(const char *from, const char *to)
{
	int rc = mbfs_check_alive(FS);
	if (!rc && (mbfs_is_control(from) || mbfs_is_control(to)))
		rc = -EPERM;
	if (!rc)
		rc = mbfs_node_sync_path(FS, from);
	if (!rc)
		rc = mbfs_remote_link(FS, from, to);
	mbfs_cache_invalidate(FS->cache, to);
	mbfs_cache_invalidate(FS->cache, from);
	return rc;
}

static int mbfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char buf[MB_PATH_MAX];
	path = op_path(path, fi, buf);
	int rc = mbfs_check_alive(FS);
	if (!rc && (!path || mbfs_is_control(path)))
		rc = path ? -EPERM : -ENOENT;
	return rc ? rc : mbfs_ns_chmod(FS, path, mode);
}

static int mbfs_chown(const char *path, uid_t uid, gid_t gid,
		      struct fuse_file_info *fi)
{
	(void)path; (void)uid; (void)gid; (void)fi;
	return mbfs_check_alive(FS);
}

static int mbfs_truncate(const char *path, off_t size,
			 struct fuse_file_info *fi)
{
	if (mbfs_is_control(path))
		return 0;   /* `echo invalidate > .mainbrella` truncates first */
	int rc = mbfs_check_alive(FS);
	if (rc)
		return rc;
	if (fi && fi->fh)
		return mbfs_node_truncate(FS, NODE(fi), size);
	return path ? mbfs_ns_truncate(FS, path, size) : -ENOENT;
}

static int mbfs_open(const char *path, struct fuse_file_info *fi)
{
	if (mbfs_is_control(path)) {
		fi->fh = 0;
		fi->direct_io = 1;
		return 0;
	}
	int rc = mbfs_check_alive(FS);
	struct mbfs_node *n = NULL;
	if (!rc)
		rc = mbfs_node_open(FS, path, fi->flags, &n);
	if (!rc)
		fi->fh = (uintptr_t)n;
	return rc;
}

static int mbfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (mbfs_is_control(path))
		return mbfs_open(path, fi);
	int rc = mbfs_check_alive(FS);
	struct mbfs_node *n = NULL;
	if (!rc)
		rc = mbfs_node_create(FS, path, mode & 07777, &n);
	if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = mbfs_node_open(FS, path, fi->flags, &n);
	if (!rc)
		fi->fh = (uintptr_t)n;
	return rc;
}

static int mbfs_read(const char *path, char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)path;
	if (!fi->fh)
		return mbfs_control_read(FS, buf, size, off);
	int rc = mbfs_check_alive(FS);
	return rc ? rc : mbfs_node_read(FS, NODE(fi), buf, size, off);
}

static int mbfs_write(const char *path, const char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	(void)path;
	if (!fi->fh)
		return mbfs_control_write(FS, buf, size);
	int rc = mbfs_check_alive(FS);
	return rc ? rc : mbfs_node_write(FS, NODE(fi), buf, size, off);
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
	return fi->fh ? mbfs_node_flush(FS, NODE(fi)) : 0;
}

static int mbfs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh)
		mbfs_node_release(FS, NODE(fi));
	return 0;
}

static int mbfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path; (void)datasync;
	return fi->fh ? mbfs_node_flush(FS, NODE(fi)) : 0;
}

static int mbfs_utimens(const char *path, const struct timespec tv[2],
			struct fuse_file_info *fi)
{
	char buf[MB_PATH_MAX];
	path = op_path(path, fi, buf);
	if (mbfs_is_control(path))
		return 0;
	int rc = mbfs_check_alive(FS);
	if (!rc && !path)
		rc = -ENOENT;
	/* upload first, or the upload would move the mtime again */
	if (!rc)
		rc = mbfs_node_sync_path(FS, path);
	if (!rc)
		rc = mbfs_remote_utimens(FS, path, tv);
	if (path)
		mbfs_cache_invalidate(FS->cache, path);
	return rc;
}

static int mbfs_setxattr(const char *path, const char *name, const char *value,
			 size_t size, int flags)
{
	(void)path; (void)name; (void)value; (void)size; (void)flags;
	return -ENOTSUP;
}

static int mbfs_getxattr(const char *path, const char *name, char *value,
			 size_t size)
{
	(void)path; (void)name; (void)value; (void)size;
	return -ENOTSUP;
}

static int mbfs_listxattr(const char *path, char *list, size_t size)
{
	(void)path; (void)list; (void)size;
	return -ENOTSUP;
}

static int mbfs_removexattr(const char *path, const char *name)
{
	(void)path; (void)name;
	return -ENOTSUP;
}

const struct fuse_operations mbfs_ops = {
	.init        = mbfs_init,
	.destroy     = mbfs_destroy,
	.getattr     = mbfs_getattr,
	.readlink    = mbfs_readlink,
	.opendir     = mbfs_opendir,
	.readdir     = mbfs_readdir,
	.releasedir  = mbfs_releasedir,
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
	.utimens     = mbfs_utimens,
	.setxattr    = mbfs_setxattr,
	.getxattr    = mbfs_getxattr,
	.listxattr   = mbfs_listxattr,
	.removexattr = mbfs_removexattr,
};
