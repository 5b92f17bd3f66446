/* name.h: which names the mount can hand to the guest.
 *
 * The API carries paths as UTF-8 and decodes other bytes to U+FFFD
 * (contract §4.1), so "x\xff" and "x\xfe" would name one and the same file
 * on the guest, and a symlink target that is not UTF-8 makes the listing of
 * its whole directory fail (409). Such names are refused with EILSEQ before
 * any request; a name longer than a directory entry can be (255 bytes, as
 * on the guest's filesystems) with ENAMETOOLONG. Pure functions.
 */
#ifndef MBFS_NAME_H
#define MBFS_NAME_H

#define MBFS_NAME_MAX 255

/* Every component of the mount-relative path: 0, -ENAMETOOLONG (longer
 * than MBFS_NAME_MAX bytes) or -EILSEQ (not UTF-8). */
int mbfs_name_check(const char *path);

/* A symlink's target text: 0 or -EILSEQ (its length is the kernel's
 * business: PATH_MAX). */
int mbfs_name_check_target(const char *target);

#endif
