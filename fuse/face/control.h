/* control.h: the virtual file MOUNTPOINT/.mainbrella.
 *
 * Reading it gives the JSON of mb_control_format (API URL, identity, root,
 * mountpoint, pid, version, the generation's hard deadline expiresAt when
 * the service gave one; never the key), and once this mount has kept data
 * it could not upload, "kept": [{"path": guest path, "file": where the
 * data is, "reason"}] (journal.h). Writing the line
 * MB_CONTROL_INVALIDATE drops every cache of the mount: attributes,
 * listings, negative entries, clean file copies (a whole-second mtime with
 * an unchanged size cannot prove a copy current), the sharing of clean
 * open files, and (before the write returns, or after 5 s) the kernel's
 * attributes and pages of every path it was shown (kcache.h); nothing
 * still to be sent (queued times) is dropped. Writing
 * MB_CONTROL_SYNC sends everything the mount still holds back before the
 * write returns: closed files queued for write-back (wbq.h) and queued
 * times (batch.h); the write fails with EIO when that or an earlier batch
 * failed since the last sync. The text also carries "writeback" (the
 * queue's figures, mbfs_wbq_json), which `mbfs --status` prints,
 * "pendingPaths" (its first paths, wbq_pending.h), "cacheDir",
 * "opTimeoutMs" (for `mbfs -u`), and "unsent" when an ended mount left a
 * record (unsent.h); writing MB_CONTROL_UNSENT_SEEN marks that record as
 * warned about. mbexec writes "sync" before a command and "invalidate"
 * after it. Not listed by readdir. Thread-safe.
 */
#ifndef MBFS_CONTROL_H
#define MBFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct mbfs;

/* Build the JSON once the daemon runs (pid known). 0 or -ENOMEM. */
int mbfs_control_init(struct mbfs *fs);
bool mbfs_is_control(const char *path);
/* Mode 0600, owned by the mounting user (not -o uid/gid). */
void mbfs_control_stat(const struct mbfs *fs, struct stat *st);
/* May the process of user caller open the control file? 0 (the mounting
 * user, or root) or -EACCES. */
int mbfs_control_access(uid_t caller);
/* An open of the control file: its handle, low bit set. One opened for
 * reading holds the text as it was then, so that a read in many calls
 * (cat, Python's read()) never mixes two versions of it. */
uint64_t mbfs_control_open(const struct mbfs *fs, int flags);
void mbfs_control_release(uint64_t fh);
/* Up to size bytes of the handle's text from off (the text now when the
 * handle holds none). */
int mbfs_control_read(const struct mbfs *fs, uint64_t fh, char *buf,
		      size_t size, off_t off);
/* Returns size when the text is a known command, else -EINVAL. */
int mbfs_control_write(struct mbfs *fs, const char *buf, size_t size);
/* Send what is held back (the "sync" command). 0, -EEXIST when the only
 * files refused were conflicts (each kept, wbq.h), or -EIO. */
int mbfs_control_sync(struct mbfs *fs);
/* Drop every cache (the "invalidate" command). */
void mbfs_invalidate_everything(struct mbfs *fs);

#endif
