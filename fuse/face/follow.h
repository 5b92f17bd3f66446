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
 *
 * A command may rename a file held open (a log rotated, an editor's file
 * moved): its fds follow the file to its new name, as on a local disk,
 * and write there. The guest's device, inode number and birth time of
 * each clean copy held open say which file it is (an inode number alone is
 * taken by the next new file once freed, on ext4 at once): learned before
 * a command (mbfs_follow_before, one exec when a copy's is not known),
 * checked in every round and after the command (mbfs_follow_after, one
 * exec when one is known). A file no longer under its name is looked for
 * under the mounted directory; one gone from it keeps its fds' bytes,
 * nameless. The moves of one answer are taken at once (a swap), by the
 * copies (guestfile.h), then by the kernel's inodes and names (ll.h), so
 * that fstat, fchmod and a new open of the new name are the held file.
 * Without a birth time (a file system that keeps none) nothing follows.
 */
#ifndef MBFS_FOLLOW_H
#define MBFS_FOLLOW_H

struct mbfs;
struct mbfs_follow;

/* Start the thread. 0 or -errno (open files then follow at the end of
 * each command only). */
int mbfs_follow_start(struct mbfs *fs, struct mbfs_follow **out);

/* Before a command starts (its sync): learn which guest file each clean
 * copy held open is. One exec when one is not known, else none. */
void mbfs_follow_before(struct mbfs *fs);
/* After a command, before the invalidation: the copies held open follow
 * the files a command renamed. One exec when one's file is known. */
void mbfs_follow_after(struct mbfs *fs);

/* Stop and join it. NULL is fine. */
void mbfs_follow_stop(struct mbfs_follow *f);

#endif
