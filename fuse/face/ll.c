/* ll.c: the FUSE session on libfuse's low-level API (ll.h).
 *
 * Each handler names its node by path through the inode table, calls the
 * path operation (ops.c through bound.c), then tells the table what the
 * operation changed. Ops with a file handle get no path (ops.c follows
 * its node). Errors: the path operations return -errno; handlers reply.
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "fuse/face/itab.h"
#include "fuse/face/ll.h"
#include "fuse/face/ll_int.h"

struct mbfs_ll mbfs_ll;
static __thread uid_t caller_uid;

void mbfs_ll_begin(fuse_req_t req)
{
	caller_uid = fuse_req_ctx(req)->uid;
}

uid_t mbfs_ll_uid(void)
{
	return caller_uid;
}

void mbfs_ll_reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc < 0 ? -rc : rc);
}

/* -o umask: the permissions every file shows. */
void mbfs_ll_set_mode(struct stat *st)
{
	if (L.o->set_mode)
		st->st_mode = (st->st_mode & S_IFMT) | (0777 & ~L.o->umask);
}

/* The attributes of a new or found name, and its node counted once more
 * (the reply must then reach the kernel, or be forgotten). */
int mbfs_ll_lookup_path(uint64_t parent, const char *name, const char *path,
		       struct fuse_entry_param *e, struct fuse_file_info *fi)
{
	memset(e, 0, sizeof(*e));
	int rc = L.op->getattr(path, &e->attr, fi);
	if (rc)
		return rc;
	mbfs_ll_set_mode(&e->attr);
	e->ino = mbfs_itab_looked_up(T, parent, name, &e->attr);
	if (!e->ino)
		return -ENOMEM;
	e->entry_timeout = L.entry_timeout;
	e->attr_timeout = L.attr_timeout;
	return 0;
}

void mbfs_ll_reply_entry(fuse_req_t req, const struct fuse_entry_param *e,
			int rc)
{
	if (rc)
		mbfs_ll_reply_err(req, rc);
	else if (fuse_reply_entry(req, e) == -ENOENT && e->ino)
		mbfs_itab_forget(T, e->ino, 1);   /* the caller went */
}

static void ll_init(void *data, struct fuse_conn_info *conn)
{
	(void)data;
	struct fuse_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.entry_timeout = 1.0;
	cfg.attr_timeout = 1.0;
	if (L.op->init)
		L.op->init(conn, &cfg);
	L.entry_timeout = cfg.entry_timeout;
	L.attr_timeout = cfg.attr_timeout;
	L.negative_timeout = cfg.negative_timeout;
	L.auto_cache = cfg.auto_cache != 0;
	L.ac_ms = (uint64_t)((cfg.ac_attr_timeout_set ? cfg.ac_attr_timeout
						     : cfg.attr_timeout) * 1000.0);
}

static void ll_destroy(void *data)
{
	if (L.op->destroy)
		L.op->destroy(data);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	char path[MB_PATH_MAX];
	uint64_t dir = parent;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		if (name[1])
			dir = mbfs_itab_parent(T, parent);
		name = NULL;
	}
	/* a name looked up in a directory that is gone is not there */
	struct mbfs_itab_locks l = { 0 };
	int rc = dir ? mbfs_ll_path(&l, dir, name, path) : -ENOENT;
	if (rc == -ESTALE)
		rc = -ENOENT;
	if (!rc)
		rc = mbfs_ll_lookup_path(dir, name, path, &e, NULL);
	mbfs_itab_unlock(T, &l);
	if (rc == -ENOENT && L.negative_timeout != 0.0) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = L.negative_timeout;
		rc = 0;
	}
	mbfs_ll_reply_entry(req, &e, rc);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	mbfs_itab_forget(T, ino, n);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		mbfs_itab_forget(T, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

int mbfs_ll_path(struct mbfs_itab_locks *l, uint64_t ino, const char *name,
		 char *buf)
{
	l->read[0] = ino;
	int rc = mbfs_itab_lock(T, l);
	if (rc) {
		memset(l, 0, sizeof(*l));
		return rc;
	}
	return mbfs_itab_path(T, ino, name, buf);
}

int mbfs_ll_node_path(struct mbfs_itab_locks *l, fuse_ino_t ino, char *path,
		      struct stat *st)
{
	int rc = mbfs_ll_path(l, ino, NULL, path);
	if (rc == -ESTALE && mbfs_itab_gone_stat(T, ino, st) == 1)
		return 1;
	return rc;
}

static void reply_attr(fuse_req_t req, fuse_ino_t ino, struct stat *st)
{
	/* the hidden name is no link of its own */
	if (st->st_nlink > 0 && mbfs_itab_hidden(T, ino))
		st->st_nlink--;
	mbfs_itab_gone_overlay(T, ino, st);
	mbfs_ll_set_mode(st);
	mbfs_itab_set_stat(T, ino, st);
	fuse_reply_attr(req, st, L.attr_timeout);
}

/* A node without a path that some fd holds open (a file hidden while
 * open, whose directory went): its open copy answers, with no links. 1
 * then; 0 when none is open. */
static int gone_open_stat(fuse_ino_t ino, struct stat *st)
{
	struct fuse_file_info fi;
	memset(&fi, 0, sizeof(fi));
	if (!mbfs_itab_lend_fh(T, ino, L.o->hold, &fi.fh))
		return 0;
	int rc = L.op->getattr(NULL, st, &fi);
	L.o->drop(fi.fh);
	if (rc)
		return 0;
	st->st_nlink = 0;
	mbfs_itab_gone_overlay(T, ino, st);
	mbfs_ll_set_mode(st);
	mbfs_itab_set_stat(T, ino, st);
	return 1;
}

/* A setattr of a node without a path: a size through a handle still open
 * on it (its copy), mode and times kept with the node. */
static void gone_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			 int valid)
{
	struct stat st;
	int rc = 0;
	if (valid & FUSE_SET_ATTR_SIZE) {
		struct fuse_file_info fi;
		memset(&fi, 0, sizeof(fi));
		rc = -ENOENT;
		if (mbfs_itab_lend_fh(T, ino, L.o->hold, &fi.fh)) {
			rc = L.op->truncate(NULL, attr->st_size, &fi);
			L.o->drop(fi.fh);
		}
	}
	if (rc)
		return mbfs_ll_reply_err(req, rc);
	mbfs_itab_gone_setattr(T, ino, attr, valid, &st);
	gone_open_stat(ino, &st);
	fuse_reply_attr(req, &st, L.attr_timeout);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	mbfs_ll_begin(req);
	struct stat st;
	memset(&st, 0, sizeof(st));
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = 0;
	if (!fi) {
		rc = mbfs_ll_node_path(&l, ino, path, &st);
		if (rc == 1) {
			mbfs_itab_unlock(T, &l);
			gone_open_stat(ino, &st);
			fuse_reply_attr(req, &st, L.attr_timeout);
			return;
		}
	}
	if (!rc)
		rc = L.op->getattr(fi ? NULL : path, &st, fi);
	mbfs_itab_unlock(T, &l);
	if (rc)
		mbfs_ll_reply_err(req, rc);
	else
		reply_attr(req, ino, &st);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	mbfs_ll_begin(req);
	struct stat st;
	memset(&st, 0, sizeof(st));
	char buf[MB_PATH_MAX];
	const char *path = NULL;
	struct mbfs_itab_locks l = { 0 };
	int rc = 0;
	if (!fi) {
		rc = mbfs_ll_node_path(&l, ino, buf, &st);
		if (rc == 1) {
			mbfs_itab_unlock(T, &l);
			return gone_setattr(req, ino, attr, valid);
		}
		path = buf;
	}
	if (!rc && (valid & FUSE_SET_ATTR_MODE))
		rc = L.op->chmod(path, attr->st_mode, fi);
	if (!rc && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = L.op->chown(path,
				 (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
				 (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1,
				 fi);
	if (!rc && (valid & FUSE_SET_ATTR_SIZE))
		rc = L.op->truncate(path, attr->st_size, fi);
	if (!rc && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		rc = L.op->utimens(path, tv, fi);
	}
	if (!rc)
		rc = L.op->getattr(path, &st, fi);
	mbfs_itab_unlock(T, &l);
	if (rc)
		mbfs_ll_reply_err(req, rc);
	else
		reply_attr(req, ino, &st);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	mbfs_ll_begin(req);
	char path[MB_PATH_MAX];
	char target[PATH_MAX + 1];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, ino, NULL, path);
	if (!rc)
		rc = L.op->readlink(path, target, sizeof(target));
	mbfs_itab_unlock(T, &l);
	if (rc)
		return mbfs_ll_reply_err(req, rc);
	target[PATH_MAX] = '\0';
	fuse_reply_readlink(req, target);
}

/* The last handle of ino let go; a hidden file goes with it. */
static void release(fuse_ino_t ino, struct fuse_file_info *fi)
{
	mbfs_itab_closing(T, ino, fi->fh);   /* lent no more */
	L.op->release(NULL, fi);
	if (mbfs_itab_closed(T, ino)) {
		char path[MB_PATH_MAX];
		struct mbfs_itab_locks l = { 0 };
		if (mbfs_ll_path(&l, ino, NULL, path) == 0)
			L.op->unlink(path);
		/* let go first: the lock is let go along the node's path */
		mbfs_itab_unlock(T, &l);
		mbfs_itab_unname(T, ino);
	}
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	mbfs_ll_begin(req);
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, ino, NULL, path);
	if (!rc)
		rc = L.op->open(path, fi);
	mbfs_itab_unlock(T, &l);
	if (rc)
		return mbfs_ll_reply_err(req, rc);
	if (L.auto_cache && mbfs_itab_cache_age(T, ino, L.ac_ms) == 2) {
		struct stat st;
		if (L.op->getattr(NULL, &st, fi) == 0)
			mbfs_itab_set_stat(T, ino, &st);
		else
			mbfs_itab_cache_drop(T, ino);
	}
	if (mbfs_itab_opened(T, ino, fi->fh, L.auto_cache))
		fi->keep_cache = 1;
	if (L.o->direct_io)
		fi->direct_io = 1;
	if (fuse_reply_open(req, fi) == -ENOENT)
		release(ino, fi);   /* the open was interrupted */
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc)
		rc = L.op->create(path, mode, fi);
	if (rc) {
		mbfs_itab_unlock(T, &l);
		return mbfs_ll_reply_err(req, rc);
	}
	rc = mbfs_ll_lookup_path(parent, name, path, &e, fi);
	mbfs_itab_unlock(T, &l);
	if (!rc && !S_ISREG(e.attr.st_mode)) {
		mbfs_itab_forget(T, e.ino, 1);
		rc = -EIO;
	}
	if (rc) {
		L.op->release(NULL, fi);
		return mbfs_ll_reply_err(req, rc);
	}
	mbfs_itab_opened(T, e.ino, fi->fh, false);
	if (L.o->direct_io)
		fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		release(e.ino, fi);
		mbfs_itab_forget(T, e.ino, 1);
	}
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	mbfs_ll_begin(req);
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return mbfs_ll_reply_err(req, -ENOMEM);
	int rc = L.op->read(NULL, buf, size, off, fi);
	if (rc < 0)
		mbfs_ll_reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	mbfs_ll_begin(req);
	int rc = L.op->write(NULL, buf, size, off, fi);
	if (rc < 0)
		mbfs_ll_reply_err(req, rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	mbfs_ll_begin(req);
	mbfs_ll_reply_err(req, L.op->flush(NULL, fi));
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	mbfs_ll_begin(req);
	int rc = 0;
	if (fi->flush)
		rc = L.op->flush(NULL, fi);
	release(ino, fi);
	mbfs_ll_reply_err(req, rc);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)ino;
	mbfs_ll_begin(req);
	mbfs_ll_reply_err(req, L.op->fsync(NULL, datasync, fi));
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	mbfs_ll_begin(req);
	struct statvfs st;
	memset(&st, 0, sizeof(st));
	int rc = L.op->statfs("/", &st);
	if (rc)
		mbfs_ll_reply_err(req, rc);
	else
		fuse_reply_statfs(req, &st);
}

static void ll_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	(void)ino;
	mbfs_ll_begin(req);
	unsigned revents = 0;
	int rc = L.op->poll(NULL, fi, ph, &revents);
	if (rc)
		mbfs_ll_reply_err(req, rc);
	else
		fuse_reply_poll(req, revents);
}

static const struct fuse_lowlevel_ops ll_ops = {
	.init         = ll_init,
	.destroy      = ll_destroy,
	.lookup       = ll_lookup,
	.forget       = ll_forget,
	.forget_multi = ll_forget_multi,
	.getattr      = ll_getattr,
	.setattr      = ll_setattr,
	.readlink     = ll_readlink,
	.mknod        = mbfs_ll_mknod,
	.mkdir        = mbfs_ll_mkdir,
	.unlink       = mbfs_ll_unlink,
	.rmdir        = mbfs_ll_rmdir,
	.symlink      = mbfs_ll_symlink,
	.rename       = mbfs_ll_rename,
	.link         = mbfs_ll_link,
	.open         = ll_open,
	.read         = ll_read,
	.write        = ll_write,
	.flush        = ll_flush,
	.release      = ll_release,
	.fsync        = ll_fsync,
	.opendir      = mbfs_ll_opendir,
	.readdir      = mbfs_ll_readdir,
	.releasedir   = mbfs_ll_releasedir,
	.fsyncdir     = mbfs_ll_fsyncdir,
	.statfs       = ll_statfs,
	.create       = ll_create,
	.poll         = ll_poll,
};

struct fuse_session *mbfs_ll_new(struct fuse_args *args,
				 const struct fuse_operations *ops,
				 const struct mbfs_ll_opts *o)
{
	L.op = ops;
	L.o = o;
	L.itab = mbfs_itab_new();
	if (!L.itab)
		return NULL;
	L.se = fuse_session_new(args, &ll_ops, sizeof(ll_ops), NULL);
	if (!L.se) {
		mbfs_itab_free(L.itab);
		L.itab = NULL;
	}
	return L.se;
}

void mbfs_ll_destroy(struct fuse_session *se)
{
	if (!se)
		return;
	fuse_session_destroy(se);
	L.se = NULL;
	mbfs_itab_free(L.itab);
	L.itab = NULL;
}

int mbfs_ll_invalidate_path(const char *path)
{
	if (!L.se || !L.itab)
		return -ENOENT;
	uint64_t ino = mbfs_itab_find_path(T, path);
	if (!ino)
		return -ENOENT;
	return fuse_lowlevel_notify_inval_inode(L.se, ino, 0, 0);
}

int mbfs_ll_invalidate_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!L.se || !L.itab || !slash || !slash[1])
		return -ENOENT;
	char dir[MB_PATH_MAX];
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	uint64_t parent = dir[0] ? mbfs_itab_find_path(T, dir) : FUSE_ROOT_ID;
	if (!parent)
		return -ENOENT;
	return fuse_lowlevel_notify_inval_entry(L.se, parent, slash + 1,
						strlen(slash + 1));
}

void mbfs_ll_moved(const char *const *from, const char *const *to, size_t k)
{
	if (L.itab)
		mbfs_itab_moved(T, from, to, k);
}

int mbfs_ll_notify_raw(const void *msg, size_t len)
{
	if (!L.se)
		return -ENOTCONN;
	ssize_t n = write(fuse_session_fd(L.se), msg, len);
	return n == (ssize_t)len ? 0 : -errno;
}
