/* follow.h: while a command runs in the mount, the files held open there
 * follow the sandbox.
 *
 * A program that keeps a file open (tail -f on a command's log, an editor
 * that watches for changes on disk) learns of a change by its fstat and
 * read. After a command, the invalidation does it; while one runs
 * (mbfs_agent_active), one thread asks the guest about every clean copy
 * held open, all in one exec (fuse/guest/follow.sh), about once a second,
 * and when the guest's size or mtime moved on, drops what the mount and
 * the kernel hold of the path, so that the fds read the guest's content
 * again (mbfs_node_recheck). An idle mount, or one with nothing open,
 * sends nothing.
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
