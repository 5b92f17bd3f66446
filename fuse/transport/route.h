/* route.h: the API's file routes (stat, list, put, mkdir, remove) for the
 * modules above transport/, by guest path (mbfs_remote_path), on the
 * mount's client and container. The rest of transport/ (remote.c, exec.c,
 * xfer*.c) calls common's bindings itself; nothing above it does. Each
 * returns 0 or -errno with err filled, as common's call does. */
#ifndef MBFS_ROUTE_H
#define MBFS_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/api.h"

struct mbfs;

/* rpath's entry, a symlink not followed. */
int mbfs_route_lstat(struct mbfs *fs, const char *rpath, struct mb_entry *e,
		     struct mb_err *err);
/* rpath's entries: the first page (*next: where the next starts, or -1),
 * or, with next NULL, every page. */
int mbfs_route_list(struct mbfs *fs, const char *rpath,
		    struct mb_entry_list *out, long *next, struct mb_err *err);
/* len bytes of data as the file rpath, replacing it. */
int mbfs_route_put(struct mbfs *fs, const char *rpath, const void *data,
		   size_t len, struct mb_err *err);
/* A private directory (0700) rpath; its parent must stand. */
int mbfs_route_mkdir_private(struct mbfs *fs, const char *rpath,
			     struct mb_err *err);
/* rpath, with the directories above it that are missing (0755). */
int mbfs_route_mkdirs(struct mbfs *fs, const char *rpath, struct mb_err *err);
/* rpath's permission bits (a symlink is not followed). */
int mbfs_route_chmod(struct mbfs *fs, const char *rpath, unsigned mode,
		     struct mb_err *err);
/* rpath and all below it. */
int mbfs_route_remove_tree(struct mbfs *fs, const char *rpath,
			   struct mb_err *err);

#endif
