/* ll.h: the mount's FUSE session, on libfuse's low-level API.
 *
 * The kernel names files by node number; ops.c (through bound.c) by path.
 * ll.c answers each request by asking the inode table (itab.h) for the
 * path, calling the path operation, and telling the table what changed.
 * It keeps what libfuse's high-level API did, as mbfs relied on it: a
 * file removed or replaced while open is renamed to a hidden name (hidden.h)
 * and removed at its last close; pages are kept across opens while size
 * and mtime stay (auto_cache); a listing is read whole at offset 0 and
 * served in pieces; a request holds its path until it is done (tree
 * locks, itab.h). What it does beyond: a node the kernel still holds
 * after its name went (a directory removed while an fd or a shell's cwd
 * is in it) answers from its last attributes, with no links, and lists
 * empty, as on a local disk, where the high-level API said ESTALE; and a
 * file a command renamed takes the kernel's inode along (mbfs_ll_moved),
 * so the fds held on it and its new name are one file.
 *
 * One session per process. Thread-safe: requests come from libfuse's
 * worker threads.
 */
#ifndef MBFS_LL_H
#define MBFS_LL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_args;
struct fuse_operations;
struct fuse_session;

/* What the session does beyond ops. */
struct mbfs_ll_opts {
	/* take and let go a reference to what an open's handle (fi->fh)
	 * holds, for a request that comes without the handle (the kernel's
	 * fstat of a file with no path any more); hold is called under the
	 * inode table's lock and returns false for a handle that holds no
	 * file */
	bool (*hold)(uint64_t fh);
	void (*drop)(uint64_t fh);
	/* what a program's rename is refused before it changes anything:
	 * a target held open is hidden first, then the rename is made, so a
	 * refusal must come before (0 or -errno); the rename op itself also
	 * takes ll.c's own renames to hidden names */
	int (*rename_check)(const char *from, const char *to, unsigned flags);
	/* -o umask=M: every file shows the permissions 0777 & ~M, as
	 * libfuse's high-level API had it */
	bool set_mode;
	mode_t umask;
	bool direct_io;         /* -o direct_io: no page cache */
};

/* A session answering with ops and o (both kept, not copied). NULL when
 * libfuse refused args (it said why) or without memory. */
struct fuse_session *mbfs_ll_new(struct fuse_args *args,
				 const struct fuse_operations *ops,
				 const struct mbfs_ll_opts *o);
/* After unmounting: destroys the session (ops' destroy runs) and the
 * table. */
void mbfs_ll_destroy(struct fuse_session *se);

/* The uid of the process whose request this thread answers. */
uid_t mbfs_ll_uid(void);

/* Drop the kernel's attributes and pages of path (a mount path "/a/b").
 * 0, -ENOENT when the kernel holds no inode under that path, or libfuse's
 * -errno. For any thread but a request's (it may wait on one). */
int mbfs_ll_invalidate_path(const char *path);
/* Drop the kernel's name path (its directory's entry): 0, -ENOENT when
 * the kernel holds no such directory, or libfuse's -errno. For any thread
 * but a request's. */
int mbfs_ll_invalidate_name(const char *path);
/* A command moved the files from[i] to to[i] (NULL: gone), and the mount
 * followed (itab.h mbfs_itab_moved): the kernel's inodes follow too.
 * Their names are then to be dropped (mbfs_ll_invalidate_name). */
void mbfs_ll_moved(const char *const *from, const char *const *to, size_t k);
/* Write a raw notification to the session's device (kcache's epoch).
 * 0 or -errno. */
int mbfs_ll_notify_raw(const void *msg, size_t len);

#endif
