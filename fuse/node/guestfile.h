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

/* "DEVICE:INODE:BIRTH" of a guest's file (stat's %d:%i:%W), with its NUL. */
#define MBFS_GUEST_ID_MAX 64

/* A guest file that some fd holds open with no change of ours, and the
 * guest's size and mtime its copy was fetched at (follow.c); loaded
 * false: not fetched yet (an empty file, or not read yet), the base is
 * unknown. */
struct mbfs_node_base {
	char path[MB_PATH_MAX];
	bool loaded;
	uint64_t size;
	time_t mtime;
	char id[MBFS_GUEST_ID_MAX];   /* the guest file's identity, or "" */
	bool held;              /* a program holds it open (not only the
	                           write-back queue) */
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

/* guestid.c: which file of the guest's an open clean copy is, so that its
 * fds follow it when a command renames it (fuse/face/follow.c asks). */

/* The clean copies of path are of the guest's file id ("": not known). */
void mbfs_node_set_id(struct mbfs *fs, const char *path, const char *id);
/* A command moved the guest's file id from `from` to `to` (NULL: it is
 * gone). */
struct mbfs_node_move {
	const char *from, *to, *id;
};
/* Take the moves m[0..k) at once (a swap of two names moves both): the
 * clean copies of each file follow it, and those at a `to` that does not
 * move (the file it replaced) keep their fds' bytes, nameless, as on a
 * local disk. How many copies followed. */
size_t mbfs_node_followed(struct mbfs *fs, const struct mbfs_node_move *m,
			  size_t k);

#endif
