/* ops.h: the FUSE operations of mbfs (ops.c). Uses the global mbfs_fs. */
#ifndef MBFS_OPS_H
#define MBFS_OPS_H

#include "fuse/mbfs.h"

#include <fuse.h>

extern const struct fuse_operations mbfs_ops;

/* Fill *ops with mbfs_ops, each operation that may talk to the service
 * bounded by one deadline, its start + op_timeout (bound.c). */
void mbfs_bound_ops(struct fuse_operations *ops);

#endif
