/* follow.h: while a command runs in the mount, the files held open there
 * and the directories listed follow the sandbox.
 *
 * A program that keeps a file open (tail -f on a command's log) learns of
 * a change by its fstat and read; one that watches a file or a directory
 * (an editor asking whether its file changed on disk, a file manager) by
 * stat and readdir. After a command, the invalidation does it; while one
 * runs (mbfs_agent_active), one thread asks the guest, all in one exec
 * (fuse/guest/follow.sh) about once a second, about every clean copy held
 * open and the latest listings the mount holds (a few small ones). When an
 * open file's size or mtime moved on, it drops what the mount and the
 * kernel hold of the path, so that the fds read the guest's content again
 * (mbfs_node_recheck); a listing comes back as a fresh one, and the names
 * in it that changed are dropped from the kernel (cache.c). An idle mount,
 * or one with nothing open or listed, sends nothing.
 */
#ifndef MBFS_FOLLOW_H
#define MBFS_FOLLOW_H

struct mbfs;
struct mbfs_follow;

/* Start the thread. 0 or -errno (open files then follow at the end of
 * each command only). */
int mbfs_follow_start(struct mbfs *fs, struct mbfs_follow **out);

/* Stop and join it. NULL is fine. */
void mbfs_follow_stop(struct mbfs_follow *f);

#endif
