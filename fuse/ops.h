/* ops.h: the FUSE operations of mbfs (ops.c). Uses the global mbfs_fs. */
#ifndef MBFS_OPS_H
#define MBFS_OPS_H

#include "fuse/mbfs.h"

#include <fuse.h>

extern const struct fuse_operations mbfs_ops;

#endif
