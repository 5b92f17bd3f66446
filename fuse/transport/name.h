/* name.h: which names the mount can hand to the guest, and which names
 * of the guest it shows.
 *
 * The API carries paths as UTF-8 and decodes other bytes to U+FFFD
 * (contract §4.1), so "x\xff" and "x\xfe" would name one and the same file
 * on the guest, and a symlink target that is not UTF-8 makes the listing of
 * its whole directory fail (409). Such names are refused with EILSEQ before
 * any request; a name longer than a directory entry can be (255 bytes, as
 * on the guest's filesystems) with ENAMETOOLONG.
 *
 * Reserved names are mbfs's own: those beginning MBFS_PRIVATE_PREFIX (upload
 * staging .mbfs-up, xfer.h; bulk-read pieces .mbfs-dl, prefetch; long
 * commands .mbfs-sh, exec.c), those beginning MBFS_HIDDEN_PREFIX (files
 * unlinked while open, hidden.h) and the control file MB_CONTROL_NAME at
 * the mount's root. No op makes one (EPERM), a lookup of one answers
 * ENOENT, a listing never shows one. This header is the one place that
 * says so; the listing rule (mbfs_name_filter) is applied by the cache to
 * every listing it takes, from the list route or a bulk listing alike.
 */
#ifndef MBFS_NAME_H
#define MBFS_NAME_H

#include <stdbool.h>

struct mb_entry_list;

#define MBFS_NAME_MAX 255
#define MBFS_PRIVATE_PREFIX ".mbfs-"
#define MBFS_HIDDEN_PREFIX ".fuse_hidden"

/* Every component of the mount-relative path: 0, -ENAMETOOLONG (longer
 * than MBFS_NAME_MAX bytes) or -EILSEQ (not UTF-8). Pure. */
int mbfs_name_check(const char *path);

/* A symlink's target text: 0 or -EILSEQ (its length is the kernel's
 * business: PATH_MAX). Pure. */
int mbfs_name_check_target(const char *target);

/* true when the last component of the mount-relative path is reserved
 * (above). Pure. */
bool mbfs_name_reserved(const char *path);

/* A name an op is about to make (create, mknod, mkdir, symlink, link's
 * and rename's destination): mbfs_name_check(), then -EPERM for a
 * reserved name, with one log line. The control file is left to the
 * caller: it exists, so the op answers as for an existing name. */
int mbfs_name_check_new(const char *path);

/* Remove from a listing of dir (mount-relative) every entry the mount must
 * not show, releasing each, and sort the rest by name (strcmp): names no
 * directory can hold ("", ".", "..", one with '/', one that held a NUL
 * byte as sent (mb_entry.name_cut), one longer than MBFS_NAME_MAX), the
 * second and later entries of one name (the kernel would reject the whole
 * listing for the first kind, and show a repeated name twice), and
 * reserved names. Each is
 * logged once per directory and name (a warning; mbfs's own staging names,
 * which a listing may catch mid-upload, at debug level only), not at every
 * listing. Thread-safe. */
void mbfs_name_filter(const char *dir, struct mb_entry_list *list);

#endif
