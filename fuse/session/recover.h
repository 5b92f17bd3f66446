/* recover.h: at mount, what earlier mounts of this container left undone.
 *
 * Mounts that ended without cleaning up (kill -9, a crash, a power cut)
 * leave their journal (journal.h). Before the mount becomes visible, each
 * file they had written and not uploaded goes to the guest when the
 * guest's file is still the one it was written against (same size and
 * mtime, or the SHA-256 of our last upload; for a file created there, still
 * no file), otherwise it moves under DIR/kept/ with its guest path, and one
 * line (stderr, or the log) and the control file say which and why. A file
 * written for another generation of the slot is kept: that sandbox is
 * gone. What their uploads had staged on the guest is removed. Nothing is
 * deleted that never reached the guest.
 */
#ifndef MBFS_RECOVER_H
#define MBFS_RECOVER_H

struct mbfs;

/* Needs fs->client, fs->journal and the attached generation. Returns the
 * number of files kept (0 when everything went up or nothing was left). */
unsigned mbfs_recover(struct mbfs *fs);

#endif
