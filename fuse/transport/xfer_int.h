/* xfer_int.h: what xfer.c (downloads, the worker pool), xfer_pieces.c
 * (a large download's pieces), xfer_ahead.c (a reader's fetch going on)
 * and xfer_up.c (uploads) share, and the archives of prefetch.c use. Not
 * for other modules. */
#ifndef MBFS_XFER_INT_H
#define MBFS_XFER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "fuse/durable/fdio.h"
#include "fuse/transport/report.h"

struct mbfs;

/* Run fn(ud, i) for i in [0, n) on up to MBFS_XFER_THREADS threads (this
 * one included); the first non-zero return stops handing out more. Returns
 * that value or 0. */
int mbfs_xfer_parallel(size_t n, int (*fn)(void *ud, size_t i), void *ud);

/* mbfs_pread_all(), mbfs_pwrite_all(): fuse/fdio.h */

/* mbfs_xfer_numbers(): fuse/report.h */

/* Remove a guest directory of ours (recursive), best effort. 0 when it is
 * gone (or was never there), else -errno. */
int mbfs_xfer_remove_dir(struct mbfs *fs, const char *rdir);

/* A download's guest directory (pieces) in the journal before it exists,
 * so that one a crash leaves is removed by the next mount: the note's id,
 * 0 when it could not be noted (the download goes on without). */
unsigned mbfs_xfer_note_dir(struct mbfs *fs, const char *rdir);
/* The noted rdir is gone (gone: never made, or removed by a guest
 * script): the note goes. */
void mbfs_xfer_dir_gone(struct mbfs *fs, unsigned note);
/* Remove the noted rdir now (mbfs_xfer_remove_dir); a removal that fails
 * leaves the note for the next sweep (mbfs_xfer_sweep) or mount. */
void mbfs_xfer_remove_noted(struct mbfs *fs, const char *rdir, unsigned note);

#endif
