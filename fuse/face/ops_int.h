/* ops_int.h: what the two halves of the FUSE table share: ops.c (the
 * table, attributes, listings, open files) and ops_name.c (the namespace
 * operations). Not for other modules. */
#ifndef MBFS_OPS_INT_H
#define MBFS_OPS_INT_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <fuse.h>

#include "fuse/mbfs.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define FS mbfs_fs
#define NODE(fi) ((struct mbfs_node *)(uintptr_t)(fi)->fh)
/* An open of the control file (control.h tags its handles). */
#define CONTROL(fi) (((fi)->fh & 1) != 0)
/* The node an open holds, or NULL (none, or the control file). */
#define NODE_OF(fi) ((fi) && (fi)->fh && !CONTROL(fi) ? NODE(fi) : NULL)

/* The path of an op that may come with a handle only (nullpath_ok):
 * the node's current path, copied into buf. NULL when unlinked. */
const char *mbfs_op_path(const char *path, struct fuse_file_info *fi,
			 char *buf);

/* ops_name.c */
int mbfs_mkdir(const char *path, mode_t mode);
int mbfs_unlink(const char *path);
int mbfs_rmdir(const char *path);
int mbfs_symlink(const char *target, const char *path);
int mbfs_rename(const char *from, const char *to, unsigned int flags);
int mbfs_link(const char *from, const char *to);
int mbfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi);
int mbfs_chown(const char *path, uid_t uid, gid_t gid,
	       struct fuse_file_info *fi);
int mbfs_truncate(const char *path, off_t size, struct fuse_file_info *fi);
int mbfs_mknod(const char *path, mode_t mode, dev_t rdev);
int mbfs_utimens(const char *path, const struct timespec tv[2],
		 struct fuse_file_info *fi);

#endif
