/* guestfile.h: a clean copy held open and the guest's file it copies.
 *
 * The guest may move on from a copy while some program holds it open: a
 * command ran, or a stat shows another size or time. The fds then check at
 * their next read and fetch the guest's file again, as fds on a local
 * disk read what another program wrote. Ownership: nothing here is the
 * caller's to free.
 */
#ifndef MBFS_GUESTFILE_H
#define MBFS_GUESTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/ident.h"

struct mbfs;

/* A guest file that some fd holds open with no change of ours, and the
 * guest's size and mtime its copy was fetched at (follow.c); loaded
 * false: not fetched yet (an empty file, or not read yet), the base is
 * unknown. */
struct mbfs_node_base {
	char path[MB_PATH_MAX];
	bool loaded;
	uint64_t size;
	time_t mtime;
};
/* Up to max such copies into v; how many. */
size_t mbfs_node_open_clean(struct mbfs *fs, struct mbfs_node_base *v,
			    size_t max);

/* Clean nodes are no longer shared with new opens, and their open fds
 * check the guest's file at their next read (control invalidate). */
void mbfs_node_invalidate_all(struct mbfs *fs);
/* The guest's file at path moved on from the copies of it: their fds
 * fetch it again at their next read. */
void mbfs_node_recheck(struct mbfs *fs, const char *path);

#endif
