/* inode.h: inode numbers that survive renames.
 *
 * A path's number is a hash of its guest path (mbfs_ino, mbfs.h), so it is
 * the same across lookups and remounts without any table. A rename made
 * through the mount moves the number with the file (backup tools and
 * `find -inum` rely on it): the new name is remembered as an alias of the
 * identity the file had, for the life of the mount, until it is removed or
 * replaced. Whatever appears later under the old name gets a number of its
 * own, so two live files never share one because of a rename. After a
 * remount a renamed file shows the number of its new path again; renames
 * made on the guest are not seen. Thread-safe (a leaf lock).
 */
#ifndef MBFS_INODE_H
#define MBFS_INODE_H

struct mbfs;
struct mbfs_inos;

/* NULL without memory (numbers are then plain hashes of the path). */
struct mbfs_inos *mbfs_inos_new(void);
void mbfs_inos_free(struct mbfs_inos *t);

/* from (a file or a directory, with everything below it) is now called to,
 * replacing whatever was there. */
void mbfs_ino_renamed(struct mbfs *fs, const char *from, const char *to);
/* path (and everything below it) is gone. */
void mbfs_ino_removed(struct mbfs *fs, const char *path);

#endif
