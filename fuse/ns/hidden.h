/* hidden.h: files unlinked or replaced while open.
 *
 * On a local disk such a file lives on for its open handles. The FUSE
 * face (face/ll.c, as libfuse's high-level API did) keeps it reachable
 * by renaming it to ".fuse_hidden" + 16 hex digits in its directory and
 * unlinking that name at the last close. That rename is the mount's alone:
 * the open copies keep the content (fetched now if they had not yet), stay
 * readable, writable, fstat-able and truncatable, and are never uploaded;
 * nothing of them exists on the guest, so no .fuse_hidden file ever shows
 * there. What the guest still holds under the old name is removed, unless
 * the thread that hid it goes on to rename another file over that name
 * (the face hides a rename's target first): the replace then stays one
 * atomic `mv -fT`. The removal is made by the next change of names
 * through the mount, the control file's "sync", unmount, or after
 * MBFS_HIDDEN_DELAY_MS, whichever comes first; until then the old name
 * does not show locally. Names of the hidden pattern are reserved: a
 * lookup of one is never sent. Thread-safe; hidden->lock is taken before
 * fs->nodes_lock and never held across a request.
 */
#ifndef MBFS_HIDDEN_H
#define MBFS_HIDDEN_H

#include <stdbool.h>
#include <sys/stat.h>

struct mbfs;
struct mbfs_hidden;
struct mbfs_node;

#define MBFS_HIDDEN_DELAY_MS 100

struct mbfs_hidden *mbfs_hidden_new(void);
/* After mbfs_hidden_stop (or when nothing was hidden). */
void mbfs_hidden_free(struct mbfs_hidden *h);
/* Unmount: make the removals still pending, stop the thread, let go of
 * the hidden files. */
void mbfs_hidden_stop(struct mbfs *fs);

/* 1 when the last component of path has the hidden pattern. */
bool mbfs_hidden_is_name(const char *path);

/* The face's rename(from, hidden) of a file open here. 0 or -errno. */
int mbfs_hidden_hide(struct mbfs *fs, const char *from, const char *hidden);
/* A directory from was renamed to to: the hidden files in it moved with
 * it (their nodes did: mbfs_node_renamed). */
void mbfs_hidden_renamed(struct mbfs *fs, const char *from, const char *to);
/* getattr through a handle of n: true with *st when n is a hidden file's
 * node (it keeps the path it had before, node.h). */
bool mbfs_hidden_getattr_node(struct mbfs *fs, struct mbfs_node *n,
			      struct stat *st);
/* getattr of path: 1 with *st (a hidden file), -ENOENT (a hidden name we
 * do not hold, or a name whose removal is pending), 0 (neither). */
int mbfs_hidden_getattr(struct mbfs *fs, const char *path, struct stat *st);
/* An open of a hidden name: the face names a file by where it is now, so
 * an open that raced with the hiding of its file arrives here. 1 with
 * *out (a reference to the file's node; O_TRUNC in flags applied),
 * -ENOENT when no such file is held, 0 when path is not a hidden name. */
int mbfs_hidden_open(struct mbfs *fs, const char *path, int flags,
		     struct mbfs_node **out);
/* The face's unlink of a hidden name at the last close: 1 when path has
 * the pattern (done, no request), 0 otherwise. */
int mbfs_hidden_unlink(struct mbfs *fs, const char *path);
/* 1 when path's removal is pending: a listing does not show it. */
bool mbfs_hidden_pending(struct mbfs *fs, const char *path);
/* Before a change of names: make every pending removal. keep (or NULL):
 * the destination of the caller's rename, whose removal, when this thread
 * asked for it, is dropped instead (the rename replaces the file). */
void mbfs_hidden_settle(struct mbfs *fs, const char *keep);

#endif
