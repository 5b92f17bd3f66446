/* control.h: the virtual file MOUNTPOINT/.mainbrella.
 *
 * Reading it gives the JSON of mb_control_format (API URL, identity, root,
 * mountpoint, pid, version; never the key). Writing the line
 * MB_CONTROL_INVALIDATE drops every cache of the mount: attributes,
 * listings, negative entries, clean file copies (a whole-second mtime with
 * an unchanged size cannot prove a copy current) and the sharing of clean
 * open files. Not listed by readdir. Thread-safe.
 */
#ifndef MBFS_CONTROL_H
#define MBFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

struct mbfs;

/* Build the JSON once the daemon runs (pid known). 0 or -ENOMEM. */
int mbfs_control_init(struct mbfs *fs);
bool mbfs_is_control(const char *path);
void mbfs_control_stat(const struct mbfs *fs, struct stat *st);
int mbfs_control_read(const struct mbfs *fs, char *buf, size_t size,
		      off_t off);
/* Returns size when the text is a known command, else -EINVAL. */
int mbfs_control_write(struct mbfs *fs, const char *buf, size_t size);
/* Drop every cache (the "invalidate" command). */
void mbfs_invalidate_everything(struct mbfs *fs);

#endif
