/* node.h: open files.
 *
 * All opens of one path share one node holding a local working copy (in the
 * cache directory, data.h), so every reader and writer of the mount sees the
 * same bytes. The copy is fetched on first read or write (not at open, so
 * `touch` or fstat never download). Writes, appends and truncates change
 * only the local copy and mark it dirty; flush, fsync, release and unmount
 * upload a dirty copy as a whole (xfer.h), except that close() queues a
 * small one for write-back in batches (wbq.h) unless -o sync_close. A failed upload returns the
 * error to close()/fsync(), keeps the data under DIR/kept/ and logs one
 * line naming the file. When the last handle is released a clean copy stays
 * in the data cache, keyed by the guest's (size, mtime).
 * A node whose path was unlinked is detached: it keeps serving its open
 * handles but never uploads. Paths are mount-relative. Thread-safe.
 */
#ifndef MBFS_NODE_H
#define MBFS_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "fuse/node/guestfile.h"

struct mbfs;
struct mbfs_node;

struct mbfs_dirent {
	char *name;
	struct stat st;
};

/* Open path (a regular file). O_TRUNC empties the copy (dirty: uploaded at
 * flush even if nothing is written). On success *out holds a reference. */
int mbfs_node_open(struct mbfs *fs, const char *path, int flags,
		   struct mbfs_node **out);

/* Create path with permission bits mode and open it: a fresh node, with
 * no request (the file reaches the guest with its first upload, which an
 * empty file gets too). -EEXIST when path exists (then the caller may
 * open it): flags with O_EXCL or O_TRUNC decide that from the caches, a
 * plain O_CREAT asks the guest. On success *out holds a reference. */
int mbfs_node_create(struct mbfs *fs, const char *path, unsigned mode,
		     int flags, struct mbfs_node **out);

/* Drop a reference; the last one uploads a dirty copy if it was not
 * already kept after a failure. */
void mbfs_node_release(struct mbfs *fs, struct mbfs_node *n);
/* Take another reference to n (held by the caller already). */
void mbfs_node_ref(struct mbfs *fs, struct mbfs_node *n);

int mbfs_node_read(struct mbfs *fs, struct mbfs_node *n, char *buf,
		   size_t size, off_t off);
/* A write at off; append (a handle opened O_APPEND): at the end of the
 * file as the mount has it now, whatever off the kernel computed from a
 * size it may no longer have (a command appended meanwhile). */
int mbfs_node_write(struct mbfs *fs, struct mbfs_node *n, const char *buf,
		    size_t size, off_t off, bool append);
int mbfs_node_truncate(struct mbfs *fs, struct mbfs_node *n, off_t size);
/* Upload when dirty (a copy queued for write-back goes now, and this
 * waits for its batch). 0 or -errno. */
int mbfs_node_flush(struct mbfs *fs, struct mbfs_node *n);
/* close() (FUSE flush): a small dirty copy is queued for write-back
 * (wbq.h) and 0 returned at once; anything else, or every file with
 * -o sync_close, is uploaded as by mbfs_node_flush. */
int mbfs_node_close(struct mbfs *fs, struct mbfs_node *n);
/* Every file written and still open, up to MBFS_WBQ_FILE_MAX (wbq.h),
 * as if closed now (a sync: what an open writer wrote so far is what a
 * command on the sandbox reads, as on a local disk). 0, or the first
 * error of mbfs_node_close. */
int mbfs_node_close_open(struct mbfs *fs);

/* Whether a node holds a local copy of a path: mbfs_nodeset_busy
 * (nodeset.h). */

/* Attributes of an open, loaded node for path (dirty: local size, time of
 * the last write). 1 and *st adjusted, or 0 when no such node. st must
 * already hold the guest's attributes or be zeroed with want_full = 1. */
int mbfs_node_getattr(struct mbfs *fs, const char *path, struct stat *st);
/* Same for a handle. */
void mbfs_node_fgetattr(struct mbfs *fs, struct mbfs_node *n, struct stat *st);

/* All attributes of a fresh node (n, or the one shared under path when n
 * is NULL): 1 and *st filled, or 0 when it is not fresh. */
int mbfs_node_stat_new(struct mbfs *fs, struct mbfs_node *n, const char *path,
		       struct stat *st);
/* chmod / unlink of a path whose node is fresh, done on the node alone
 * (waits for an upload in progress). 1 when done, 0 when not fresh; the
 * unlink gives 2 when the node had replaced a file (renamed over it) that
 * the guest has or is about to have: that one is to be removed there. */
int mbfs_node_chmod_new(struct mbfs *fs, const char *path, unsigned mode);
int mbfs_node_unlink_new(struct mbfs *fs, const char *path);
/* rename of a fresh node (not on the guest yet) from -> to, done here
 * alone (a removal queued for to sent first): 1 with *rc (0 or -errno;
 * -EIO when that removal could not be sent), or 0 when from is not
 * fresh; 2 (and
 * *rc 0) when the node had replaced what the guest has at from, which is
 * then to be removed there. */
int mbfs_node_rename_new(struct mbfs *fs, const char *from, const char *to,
			 unsigned flags, int *rc);
/* link of a fresh node that is queued for write-back (closed, small):
 * to becomes a fresh node of its own with a copy of the data (a hard
 * link's names never share later writes here, see README). 1 with *rc,
 * or 0 when from is not such a node. */
int mbfs_node_link_new(struct mbfs *fs, const char *from, const char *to,
		       int *rc);
/* What was made directly in dir and is not on the guest yet: the fresh
 * nodes, then the directories whose mkdir is queued (newdir.h). *out (free
 * with mbfs_dirents_free) and *count. 0 or -ENOMEM. */
int mbfs_node_list_new(struct mbfs *fs, const char *dir,
		       struct mbfs_dirent **out, size_t *count);
void mbfs_dirents_free(struct mbfs_dirent *v, size_t n);
/* Before a utimens of path: a dirty copy is uploaded first (the upload
 * would move the mtime again), unless it is queued for write-back: then
 * mtime (t[1]) travels with it. Files queued in a directory path go
 * first (they move its mtime). now: the mtime asked for is "now" (and
 * the atime too, or left alone). 1 when nothing more is needed (a dirty
 * copy and "now": its upload sets that), 0 to go on and queue the times,
 * or -errno when the upload failed. */
int mbfs_node_before_utimens(struct mbfs *fs, const char *path, bool now,
			     const struct timespec t[2]);
/* A clean copy of path that matches the guest as far as we know takes
 * mtime as the guest's, so it stays shared once queued times land. */
void mbfs_node_retime(struct mbfs *fs, const char *path, time_t mtime);

/* The current path of n into out (MB_PATH_MAX); -ENOENT once unlinked. */
int mbfs_node_get_path(struct mbfs *fs, struct mbfs_node *n, char *out);
/* Is n an open of an older content of its path (new opens no longer share
 * it: the mount learned of a change, or an invalidate came, while it
 * stayed open)? Then its path into out (MB_PATH_MAX). */
bool mbfs_node_superseded(struct mbfs *fs, struct mbfs_node *n, char *out);

/* Upload the dirty node of path, if any (before rename, link, utimens);
 * a fresh one is created on the guest by it. */
int mbfs_node_sync_path(struct mbfs *fs, const char *path);
/* Truncate by path when path is open (local copy + upload). 1 when done
 * here (*rc set), 0 when no node is open for path. */
int mbfs_node_truncate_path(struct mbfs *fs, const char *path, off_t size,
			    int *rc);
/* Open nodes follow a rename of from (file or directory) to to. */
void mbfs_node_renamed(struct mbfs *fs, const char *from, const char *to);
/* Detach the node of path after an unlink (it will never upload). */
void mbfs_node_unlinked(struct mbfs *fs, const char *path);
/* path goes (unlinked or replaced) while open, and the face keeps it
 * reachable as hidden (hidden.h): every open node of path gets the
 * guest's content now if it had not yet, then is renamed hidden and
 * detached (never uploaded). *out: the node new opens of path shared,
 * with a reference (drop it with mbfs_node_release), or NULL; *fresh: it
 * was created here and never uploaded, and replaced nothing the guest has
 * (nothing is on the guest under path). */
/* The kernel opened (delta 1) or released (-1) a handle of n. */
void mbfs_node_handle(struct mbfs *fs, struct mbfs_node *n, int delta);
/* Has the kernel a handle open of a file at path (or had it until a
 * moment ago)? The face hides only those (hidden.h). */
bool mbfs_node_open_at(struct mbfs *fs, const char *path);
/* Is there any node at path (open, closing, queued, or replaced and
 * still held)? */
bool mbfs_node_at(struct mbfs *fs, const char *path);
void mbfs_node_hide(struct mbfs *fs, const char *path, const char *hidden,
		    struct mbfs_node **out, bool *fresh);
/* Upload every dirty node (unmount). */
void mbfs_node_flush_all(struct mbfs *fs);
/* Free the nodes still open at exit (after flush_all; no other thread). */
void mbfs_node_free_all(struct mbfs *fs);

#endif
