/* batch.h: file times set through utimens, sent to the guest in batches.
 *
 * There is no HTTP route for utimes, and one exec per call costs a login
 * shell on the guest; tar, rsync, cp -p and touch set times on every file
 * they write. mbfs_batch_utimens records the wanted times and returns at
 * once: getattr shows them from then on (mbfs_batch_apply, through
 * mbfs_cache_getattr), and a flusher thread sends everything queued as
 * `touch -c -h` lines in one exec (several when the script would pass
 * 16 KiB) at most MBFS_BATCH_DELAY_MS after the first item was queued.
 *
 * Operations whose outcome depends on queued times send them first
 * (mbfs_batch_flush): an upload of the file (it moves the mtime), changes
 * of its name or of a directory above it, changes inside a directory whose
 * own times are queued, a listing of the directory from the guest, the
 * control message "sync" and unmount. A rename does not wait for the
 * batch: the items of the renamed path follow it (mbfs_batch_move_*).
 *
 * Trade-off: utimens has already returned success when its batch runs. A
 * failed batch is logged (one line naming the paths), the attributes of
 * those paths are invalidated so the guest's times show again, and the
 * next mbfs_batch_sync reports EIO.
 *
 * Paths are mount-relative. Times the guest is to take as "now" are the
 * local clock's, like the mtimes mbfs assumes after its own uploads.
 * Thread-safe; batch->lock is a leaf lock, never held across a request.
 */
#ifndef MBFS_BATCH_H
#define MBFS_BATCH_H

#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/outbox/pathsel.h"

struct mbfs;
struct mbfs_batch;

#define MBFS_BATCH_DELAY_MS 200

/* Which queued items mbfs_batch_flush sends, relative to its path: the
 * MBFS_BATCH_* of pathsel.h. */

struct mbfs_batch *mbfs_batch_new(void);
/* After mbfs_batch_stop (or when never started); drops what is queued. */
void mbfs_batch_free(struct mbfs_batch *b);

/* Start the flusher thread (after daemonising). 0 or -errno; without the
 * thread every utimens is sent at once. */
int mbfs_batch_start(struct mbfs *fs);
/* Send everything queued, then stop the flusher (unmount). */
void mbfs_batch_stop(struct mbfs *fs);

/* Queue tv (utimensat semantics: UTIME_NOW, UTIME_OMIT; NULL: both now)
 * for path. 0, or -errno when it could not be recorded. */
int mbfs_batch_utimens(struct mbfs *fs, const char *path,
		       const struct timespec tv[2]);

/* Show the queued mtime of path in st (whole seconds, like the guest's). */
void mbfs_batch_apply(struct mbfs *fs, const char *path, struct stat *st);

/* Send now every queued item that `which` selects relative to path (and
 * wait for one already in flight). 0, or -errno when a send failed (it is
 * logged; callers usually go on). */
int mbfs_batch_flush(struct mbfs *fs, const char *path, unsigned which);

/* Send everything queued. -EIO when this or any batch since the last sync
 * failed, else 0. */
int mbfs_batch_sync(struct mbfs *fs);

/* Around a rename of from: items at or below from are neither sent while
 * it runs (a `touch -c` of the old name would do nothing) nor lost; once
 * done, they follow the new name. */
void mbfs_batch_move_begin(struct mbfs *fs, const char *from);
void mbfs_batch_move_end(struct mbfs *fs, const char *from, const char *to,
			 bool done);

#endif
