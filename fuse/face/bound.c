/* bound.c: one deadline per FUSE operation (see ops.h).
 *
 * A decorator over mbfs_ops: each operation that may talk to the service
 * runs with this thread's operation deadline (common/api.h mb_op_deadline)
 * set to its start + op_timeout, and restored when it returns. Every call
 * it makes, every retry of those calls, and every helper thread that works
 * for it (xfer.c's parallel GETs, xfer_pieces.c's cut, a wait for
 * xfer_ahead.c's fetch) ends by then: an operation of several calls no
 * longer gets op_timeout per call. Steps inside narrow the deadline
 * (mb_op_narrow), never extend it, with two documented exceptions that
 * renew it on progress rather than on retries: a large upload (xfer_up.c:
 * each part that lands gives op_timeout more) and a write-back batch
 * (wbsend.c progress(): each part, then the apply). Background work has
 * its own bounds: the flusher's batches as just said, read-ahead
 * (xfer_ahead.c) op_timeout per call. Does nothing else: the operations
 * themselves are in ops.c.
 */
#include "fuse/mbfs.h"

#include <fuse.h>

#include "common/api.h"
#include "common/util.h"
#include "fuse/face/ops.h"

static uint64_t begin(void)
{
	return mb_op_narrow(mb_now_ms() + mbfs_fs->op_ms);
}

/* B(name, (params), (args)): the bounded form of mbfs_ops.name */
#define B(name, params, args)					\
	static int b_##name params				\
	{							\
		uint64_t prev = begin();			\
		int rc = mbfs_ops.name args;			\
		mb_op_deadline(prev);				\
		return rc;					\
	}

typedef struct fuse_file_info fi_t;

B(getattr, (const char *p, struct stat *st, fi_t *fi), (p, st, fi))
B(readlink, (const char *p, char *buf, size_t n), (p, buf, n))
B(opendir, (const char *p, fi_t *fi), (p, fi))
B(readdir, (const char *p, void *buf, fuse_fill_dir_t fill, off_t off, fi_t *fi,
	    enum fuse_readdir_flags fl), (p, buf, fill, off, fi, fl))
B(releasedir, (const char *p, fi_t *fi), (p, fi))
B(mknod, (const char *p, mode_t m, dev_t d), (p, m, d))
B(mkdir, (const char *p, mode_t m), (p, m))
B(unlink, (const char *p), (p))
B(rmdir, (const char *p), (p))
B(symlink, (const char *t, const char *p), (t, p))
B(rename, (const char *a, const char *b, unsigned int fl), (a, b, fl))
B(link, (const char *a, const char *b), (a, b))
B(chmod, (const char *p, mode_t m, fi_t *fi), (p, m, fi))
B(chown, (const char *p, uid_t u, gid_t g, fi_t *fi), (p, u, g, fi))
B(truncate, (const char *p, off_t n, fi_t *fi), (p, n, fi))
B(open, (const char *p, fi_t *fi), (p, fi))
B(create, (const char *p, mode_t m, fi_t *fi), (p, m, fi))
B(read, (const char *p, char *buf, size_t n, off_t off, fi_t *fi),
  (p, buf, n, off, fi))
B(write, (const char *p, const char *buf, size_t n, off_t off, fi_t *fi),
  (p, buf, n, off, fi))
B(statfs, (const char *p, struct statvfs *st), (p, st))
B(flush, (const char *p, fi_t *fi), (p, fi))
B(release, (const char *p, fi_t *fi), (p, fi))
B(fsync, (const char *p, int ds, fi_t *fi), (p, ds, fi))
B(fsyncdir, (const char *p, int ds, fi_t *fi), (p, ds, fi))
B(utimens, (const char *p, const struct timespec tv[2], fi_t *fi), (p, tv, fi))

void mbfs_bound_ops(struct fuse_operations *ops)
{
	*ops = mbfs_ops;   /* init, destroy and poll as they are */
	ops->getattr = b_getattr;
	ops->readlink = b_readlink;
	ops->opendir = b_opendir;
	ops->readdir = b_readdir;
	ops->releasedir = b_releasedir;
	ops->mknod = b_mknod;
	ops->mkdir = b_mkdir;
	ops->unlink = b_unlink;
	ops->rmdir = b_rmdir;
	ops->symlink = b_symlink;
	ops->rename = b_rename;
	ops->link = b_link;
	ops->chmod = b_chmod;
	ops->chown = b_chown;
	ops->truncate = b_truncate;
	ops->open = b_open;
	ops->create = b_create;
	ops->read = b_read;
	ops->write = b_write;
	ops->statfs = b_statfs;
	ops->flush = b_flush;
	ops->release = b_release;
	ops->fsync = b_fsync;
	ops->fsyncdir = b_fsyncdir;
	ops->utimens = b_utimens;
}
