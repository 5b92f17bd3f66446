/* warm.h: what the kernel may keep between opens, so that a warm `grep -r`
 * or `git status` stays in the kernel instead of asking the daemon.
 *
 * Every request the kernel sends costs two context switches and a thread
 * wake-up, whatever its handler does; the kernel already keeps names,
 * attributes and file pages (ops.c init, kcache.h). What is left per file
 * is its open, flush and release, and per directory its opendir, listing
 * and releasedir. This module decides, per open, which of them the kernel
 * may skip:
 *
 * - a file opened for reading only (no O_TRUNC) can never make its node
 *   dirty, so its close has nothing to upload or report: the kernel is
 *   told not to send FLUSH for it (FOPEN_NOFLUSH). RELEASE still comes
 *   (the node's reference), asynchronously.
 *
 * What the kernel still sends is not skipped by a daemon that tracks
 * files by handle (measured, on libfuse's high-level API, which answered
 * as ll.c does now, on a warm `grep -r` over 2,000 files in 62
 * directories: 4,309 requests, 2,000 opens and 2,000 releases, and per
 * directory an opendir, two listings (the second, past the end, answered
 * from the first), a releasedir and a getattr; no read, flush or lookup.
 * The daemon's own work is a tenth of its CPU time, the rest is the
 * kernel handing requests over):
 *
 * - OPEN and RELEASE: the kernel stops sending them only once an open
 *   answers ENOSYS, then for every file of the mount (fc->no_open): no
 *   handle for writers, no RELEASE to end an upload, and no count of
 *   opens, so an unlinked open file would not be hidden.
 * - Directory listings: ll.c answers an opendir without cache_readdir or
 *   keep_cache, so each opendir lists through the daemon, from its cache:
 *   a listing the kernel kept would stay until it is told to drop it,
 *   and kcache.c drops attributes and pages only.
 * - A directory's getattr comes with each walk (one per directory, not
 *   per file): the kernel drops a directory's atime after each listing it
 *   did not cache (fuse_readdir_uncached), and glibc's opendir fstat()s
 *   the directory it opens.
 *
 * It also counts the requests the daemon answered, by kind, for the
 * control file ("ops": what a test checks to prove a warm operation did
 * not reach the daemon). Does not know nodes, the guest, or the kernel's
 * own state. Thread-safe, without locks.
 */
#ifndef MBFS_WARM_H
#define MBFS_WARM_H

#include <stdint.h>

struct fuse_file_info;
struct mbfs;
struct mbfs_warm;

/* Requests counted for the control file. */
enum mbfs_warm_op {
	MBFS_OP_GETATTR,
	MBFS_OP_OPEN,
	MBFS_OP_READ,
	MBFS_OP_FLUSH,
	MBFS_OP_RELEASE,
	MBFS_OP_OPENDIR,
	MBFS_OP_READDIR,
	MBFS_OP_RELEASEDIR,
	MBFS_OP_COUNT
};

/* Zero counts, or NULL without memory. Every call below accepts NULL:
 * then nothing is counted. */
struct mbfs_warm *mbfs_warm_new(void);
void mbfs_warm_free(struct mbfs_warm *w);

/* One request of kind op was answered. Cheap (one relaxed atomic add). */
void mbfs_warm_count(struct mbfs_warm *w, enum mbfs_warm_op op);
/* The counts as a JSON object ({"getattr":N,...}), malloc'd, or NULL
 * without memory. */
char *mbfs_warm_json(struct mbfs_warm *w);

/* A regular file is being opened with flags (open(2)'s): sets what the
 * kernel may skip for this handle in fi. */
void mbfs_warm_open(struct mbfs *fs, int flags, struct fuse_file_info *fi);

#endif

