/* mountinfo.h: the mbfs mounts of this mount namespace.
 *
 * Reads /proc/self/mountinfo and keeps the mounts of type fuse.mbfs (what
 * mbfs mounts with -o subtype=mbfs, and what mount.fuse3 makes of an fstab
 * line of type fuse.mbfs); optionally reads each one's control file
 * (ident.h) to learn which API URL, container and generation it serves.
 * Knows nothing of FUSE itself and talks to no service. Reading a control
 * file asks the mount's daemon: a mount whose daemon is gone answers at once
 * (ENOTCONN), one that hangs makes the caller wait with it.
 */
#ifndef MB_MOUNTINFO_H
#define MB_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "ident.h"

#define MB_MOUNTINFO_FSTYPE "fuse.mbfs"

struct mb_mount {
	char mountpoint[MB_PATH_MAX];  /* as the kernel shows it, unescaped */
	bool has_control;              /* ctl read and parsed */
	int control_errno;             /* why not, when asked and !has_control */
	struct mb_control ctl;
};

/* Every mbfs mount, in mount order (a mount stacked on another comes after
 * it). With read_control, each one's control file is read too (a failure
 * there is recorded in the entry, not returned; a mount that does not
 * answer within 3 s counts as unreadable, ETIMEDOUT). *out is a malloc'd array
 * of *n entries (free()), NULL when none. 0 or -errno with err filled. */
int mb_mountinfo_list(bool read_control, struct mb_mount **out, size_t *n,
		      struct mb_err *err);

/* Is there an mbfs mount exactly at path (absolute, as realpath(3) gives
 * it)? 1 with *out (control read when read_control), 0 when none, or
 * -errno with err filled. When several are stacked there, the top one. */
int mb_mountinfo_at(const char *path, bool read_control, struct mb_mount *out,
		    struct mb_err *err);

/* For a new mount on path (as realpath(3) gives it): -EBUSY with a
 * message naming the mount already there and how to unmount it, else 0
 * (also when mountinfo cannot be read: the mount itself will tell). */
int mb_mountinfo_refuse(const char *path, struct mb_err *err);

#endif
