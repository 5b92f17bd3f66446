/* ops.h: the FUSE operations of mbfs (ops.c). Uses the global mbfs_fs. */
#ifndef MBFS_OPS_H
#define MBFS_OPS_H

#include "fuse/mbfs.h"

#include <fuse.h>

extern const struct fuse_operations mbfs_ops;

/* Fill *ops with mbfs_ops, each operation that may talk to the service
 * bounded by one deadline, its start + op_timeout (bound.c). */
void mbfs_bound_ops(struct fuse_operations *ops);

/* The checks a program's rename passes before it changes anything (names,
 * the control file, flags; the hidden pattern is ours alone): 0 or
 * -errno. ll.h's rename_check: a target held open is hidden only after
 * them. */
int mbfs_rename_check(const char *from, const char *to, unsigned int flags);

/* A reference to the file an open's handle (fi->fh) holds, for a request
 * that came without the handle (ll.h's hold): false for a handle that
 * holds no file (the control file's). Takes the node lock only.
 * mbfs_ops_drop lets it go. */
bool mbfs_ops_hold(uint64_t fh);
void mbfs_ops_drop(uint64_t fh);

#endif
