/* ops_name.c: the FUSE operations that change names and what a name
 * holds: mkdir, mknod, unlink, rmdir, symlink, rename, link, chmod,
 * chown, truncate, utimens. Each checks, then makes one call to ns/ (or
 * to the node an open holds); ops.c's table points here (ops_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/mbfs.h"

#include <fuse.h>

#include "common/log.h"
#include "fuse/cache/cache.h"
#include "fuse/cache/kcache.h"
#include "fuse/face/control.h"
#include "fuse/face/ops.h"
#include "fuse/face/ops_int.h"
#include "fuse/node/node.h"
#include "fuse/ns/hidden.h"
#include "fuse/ns/ns.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/wbq.h"
#include "fuse/transport/name.h"
#include "fuse/transport/remote.h"
#include "fuse/view/view.h"

int mbfs_mkdir(const char *path, mode_t mode)
{
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check_new(path);
	if (!rc && mbfs_is_control(path))
		rc = -EEXIST;
	if (!rc)
		mbfs_hidden_settle(FS, NULL);
	return rc ? rc : mbfs_ns_mkdir(FS, path, mode);
}

int mbfs_unlink(const char *path)
{
	if (mbfs_hidden_unlink(FS, path))
		return 0;   /* the last close of a file gone while open */
	int rc = mbfs_check_alive(FS);
	if (!rc && mbfs_is_control(path))
		rc = -EPERM;
	if (!rc)
		mbfs_hidden_settle(FS, NULL);
	if (!rc)
		rc = mbfs_ns_unlink(FS, path);
	if (!rc)
		mbfs_kcache_gone(FS->kcache, path);
	return rc;
}

int mbfs_rmdir(const char *path)
{
	int rc = mbfs_check_alive(FS);
	if (!rc)
		mbfs_hidden_settle(FS, NULL);
	if (!rc)
		rc = mbfs_ns_rmdir(FS, path);
	if (!rc)
		mbfs_kcache_gone(FS->kcache, path);
	return rc;
}

int mbfs_symlink(const char *target, const char *path)
{
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check_new(path);
	if (!rc)
		rc = mbfs_name_check_target(target);
	if (!rc && mbfs_is_control(path))
		rc = -EEXIST;
	if (rc)
		return rc;
	mbfs_hidden_settle(FS, NULL);
	return mbfs_ns_symlink(FS, target, path);
}

/* The checks of a rename, ours (a hiding, ll.c) or a program's. */
static int checks(const char *from, const char *to, unsigned int flags)
{
	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;   /* RENAME_EXCHANGE has no atomic equivalent */
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check(from);
	if (!rc)   /* ll.c hides a file open here: a reserved name */
		rc = mbfs_hidden_is_name(to) ? mbfs_name_check(to) :
					       mbfs_name_check_new(to);
	if (!rc && (mbfs_is_control(from) || mbfs_is_control(to)))
		rc = -EBUSY;
	return rc;
}

int mbfs_rename_check(const char *from, const char *to, unsigned int flags)
{
	/* a program's rename to the hidden pattern would hide the file from
	 * both sides (it was taken for our own hiding when the file was
	 * open, and removed at its close) */
	if (mbfs_hidden_is_name(to)) {
		mb_log(MB_LOG_WARN, "cannot rename a file to a name beginning '"
		       MBFS_HIDDEN_PREFIX "': reserved for mbfs (EPERM)");
		return -EPERM;
	}
	return checks(from, to, flags);
}

int mbfs_rename(const char *from, const char *to, unsigned int flags)
{
	int rc = checks(from, to, flags);
	if (rc)
		return rc;
	if (mbfs_hidden_is_name(to)) {   /* ll.c hides a file open here */
		if (!mbfs_node_open_at(FS, from))
			return -EPERM;   /* nothing to hide */
		rc = mbfs_hidden_hide(FS, from, to);
		if (!rc)
			mbfs_kcache_gone(FS->kcache, from);
		return rc;
	}
	/* a file removed here while open, whose removal on the sandbox is
	 * still to come, is replaced by our mv -fT; a directory moved there
	 * is not a file's replacement: the removal goes first */
	struct stat fst;
	bool dir = mbfs_hidden_pending(FS, to) &&
		   mbfs_view_getattr(FS, from, &fst) == 0 && S_ISDIR(fst.st_mode);
	mbfs_hidden_settle(FS, dir ? NULL : to);
	rc = mbfs_ns_rename(FS, from, to, flags);
	if (!rc) {
		mbfs_hidden_renamed(FS, from, to);
		mbfs_kcache_moved(FS->kcache, from, to);
	}
	return rc;
}

int mbfs_link(const char *from, const char *to)
{
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check_new(to);
	if (!rc && (mbfs_is_control(from) || mbfs_is_control(to)))
		rc = -EPERM;
	if (!rc)
		mbfs_hidden_settle(FS, NULL);
	if (!rc)
		rc = mbfs_ns_link(FS, from, to);
	return rc;
}

int mbfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char buf[MB_PATH_MAX];
	path = mbfs_op_path(path, fi, buf);
	int rc = mbfs_check_alive(FS);
	if (!rc && (!path || mbfs_is_control(path)))
		rc = path ? -EPERM : -ENOENT;
	return rc ? rc : mbfs_ns_chmod(FS, path, mode);
}

int mbfs_chown(const char *path, uid_t uid, gid_t gid,
		      struct fuse_file_info *fi)
{
	(void)path; (void)uid; (void)gid; (void)fi;
	return mbfs_check_alive(FS);
}

int mbfs_truncate(const char *path, off_t size,
			 struct fuse_file_info *fi)
{
	if (mbfs_is_control(path))
		return 0;   /* `echo invalidate > .mainbrella` truncates first */
	int rc = mbfs_check_alive(FS);
	if (rc)
		return rc;
	if (NODE_OF(fi))
		return mbfs_node_truncate(FS, NODE(fi), size);
	return path ? mbfs_ns_truncate(FS, path, size) : -ENOENT;
}

/* mknod(2) of a regular file: an exclusive create, closed at once (the
 * release uploads the empty file). Other types have no route. */
int mbfs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	(void)rdev;
	if (!S_ISREG(mode))
		return -EPERM;
	int rc = mbfs_check_alive(FS);
	if (!rc)
		rc = mbfs_name_check_new(path);
	if (!rc && mbfs_is_control(path))
		rc = -EEXIST;
	struct mbfs_node *n = NULL;
	if (!rc) {
		mbfs_hidden_settle(FS, NULL);
		rc = mbfs_node_create(FS, path, mode & 07777, O_EXCL, &n);
	}
	if (!rc)
		rc = mbfs_node_flush(FS, n);
	if (n)
		mbfs_node_release(FS, n);
	return rc;
}

int mbfs_utimens(const char *path, const struct timespec tv[2],
			struct fuse_file_info *fi)
{
	char buf[MB_PATH_MAX];
	path = mbfs_op_path(path, fi, buf);
	if (mbfs_is_control(path))
		return 0;
	int rc = mbfs_check_alive(FS);
	if (!rc && !path)
		rc = -ENOENT;
	if (rc)
		return rc;
	/* "now" is our clock's, like the mtime we assume after an upload */
	struct timespec now, t[2];
	clock_gettime(CLOCK_REALTIME, &now);
	for (int i = 0; i < 2; i++) {
		t[i] = tv ? tv[i] : now;
		if (t[i].tv_nsec == UTIME_NOW)
			t[i] = now;
	}
	bool mnow = !tv || tv[1].tv_nsec == UTIME_NOW;
	bool anow = !tv || tv[0].tv_nsec == UTIME_NOW ||
		    tv[0].tv_nsec == UTIME_OMIT;
	/* a dirty copy is uploaded first, or its upload would move the
	 * mtime again; the times then follow in a batch (batch.h: utimens
	 * succeeds before they reach the guest) */
	rc = mbfs_node_before_utimens(FS, path, mnow && anow, t);
	if (rc)
		return rc > 0 ? 0 : rc;
	if (t[1].tv_nsec != UTIME_OMIT)
		mbfs_node_retime(FS, path, t[1].tv_sec);
	return mbfs_batch_utimens(FS, path, t);
}
