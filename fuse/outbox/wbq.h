/* wbq.h: write-back of small files: the queue that forms batches.
 *
 * close() of a small dirty file (at most MBFS_WBQ_FILE_MAX) does not wait
 * for the network: its data is already durable in the local journal
 * (journal.h), so the node is queued here (the queue holds a reference,
 * which keeps the node, and so reads, getattr and readdir of it, local
 * until it is on the guest) and close returns. A flusher thread sends
 * what is queued once the oldest item has waited MBFS_WBQ_DELAY_MS or
 * MBFS_WBQ_BATCH_BYTES are queued, as batches of at most
 * MBFS_WBQ_BATCH_MAX bytes (wbsend.h: 1 MiB PUTs and one exec). One batch
 * is in flight at a time, so a file's versions land in order.
 *
 * A node is taken from the queue when its batch is formed: its data,
 * path, mode and mtime are read then (under node->lock), so a rename or
 * an unlink of a queued file before that only changes where it goes or
 * drops it. Operations whose outcome depends on what is queued send it
 * first and wait (mbfs_wbq_flush, mbfs_wbq_flush_node): fsync, renames
 * and removals of those paths or their parents, link, the control
 * message "sync", unmount.
 *
 * Errors: a file whose batch failed keeps its data (under kept/, one log
 * line naming it, as a failed upload at close did); the fsync that waited
 * for it returns EIO, and so does the next mbfs_wbq_sync (the control
 * file's "sync", which mbexec writes before every command). Transient
 * faults are retried inside the transport within op_timeout.
 *
 * Lock order: node->lock -> fs->nodes_lock -> the queue's lock (a leaf,
 * never held across I/O or while waiting for anything but its condition).
 * No function here may be called with node->lock held, except
 * mbfs_wbq_add, mbfs_wbq_queued and mbfs_wbq_busy (the last two also
 * with nodes_lock held). Thread-safe.
 */
#ifndef MBFS_WBQ_H
#define MBFS_WBQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/outbox/wbsend.h"

struct mbfs;
struct mbfs_node;
struct mbfs_wbq;
struct mbfs_wbq_entry;

#define MBFS_WBQ_DELAY_MS 30
#define MBFS_WBQ_MIN_AGE_MS 10  /* a batch takes files closed before this */
#define MBFS_WBQ_FILE_MAX (256u * 1024u)     /* larger: uploaded at close */
#define MBFS_WBQ_BATCH_BYTES (1024u * 1024u) /* queued this much: send now */
#define MBFS_WBQ_BATCH_MAX (4u * 1024u * 1024u)
#define MBFS_WBQ_BATCH_FILES 1024u
/* While closes keep coming (a storm: tar x, cp -r), a batch waits for a
 * pause of MBFS_WBQ_QUIET_MS, MBFS_WBQ_STORM_FILES queued, or its oldest
 * entry MBFS_WBQ_STORM_MS old: batches follow the storm's size, not the
 * pace of its closes. */
#define MBFS_WBQ_QUIET_MS 20
#define MBFS_WBQ_STORM_FILES 256u
#define MBFS_WBQ_STORM_MS 250

/* What the queue asks of the files it holds. The node layer gives these
 * at mount (node.h: mbfs_node_wbq_files): the queue sits below the nodes
 * and calls none of their functions by name. */
struct mbfs_wbq_files {
	/* another reference to n, held by the queue until it lets it go */
	void (*ref)(struct mbfs *fs, struct mbfs_node *n);
	void (*release)(struct mbfs *fs, struct mbfs_node *n);
	/* n's data into f for a batch: 1 taken, 0 nothing to send, -1 to
	 * be uploaded on its own (upload) */
	int (*take)(struct mbfs *fs, struct mbfs_node *n, struct mbfs_wbfile *f);
	/* the batch that held f ended with rc (why: the guest's words) */
	void (*done)(struct mbfs *fs, struct mbfs_node *n,
		     const struct mbfs_wbfile *f, int rc, const char *why);
	int (*upload)(struct mbfs *fs, struct mbfs_node *n);
	/* n's path into out (MB_PATH_MAX); non-zero when unlinked */
	int (*path)(struct mbfs *fs, struct mbfs_node *n, char *out);
	/* n's entry in the queue, or NULL; kept in n for the queue, read
	 * and set only under the queue's lock */
	struct mbfs_wbq_entry *(*entry)(const struct mbfs_node *n);
	void (*set_entry)(struct mbfs_node *n, struct mbfs_wbq_entry *e);
	/* n's path as it is now, for a look under nodes_lock */
	const char *(*where)(const struct mbfs_node *n);
};

struct mbfs_wbq *mbfs_wbq_new(void);
/* Before the first mbfs_wbq_add. */
void mbfs_wbq_set_files(struct mbfs_wbq *q, const struct mbfs_wbq_files *files);
/* After mbfs_wbq_stop (or when never started). */
void mbfs_wbq_free(struct mbfs_wbq *q);

/* Send everything queued and stop the flusher (unmount). From then on
 * mbfs_wbq_add refuses, and closes upload as with sync_close. */
void mbfs_wbq_stop(struct mbfs *fs);

/* Queue n (dirty, bytes long), taking a reference, or note that it
 * changed again when its batch is in flight. true when queued; false
 * when the queue refuses (stopped, no memory): upload it now. The
 * flusher starts with the first call. */
bool mbfs_wbq_add(struct mbfs *fs, struct mbfs_node *n, uint64_t bytes);

/* dir's mtime was set (utimens) while files in it are queued or in
 * flight: queue the time behind them, so their renames on the guest do not
 * move it after it was set. true when queued; false when nothing in dir is
 * pending (or the queue refuses): then nothing here will move it. Called
 * without node locks. */
bool mbfs_wbq_dir_time(struct mbfs *fs, const char *dir,
		       const struct timespec *mtime);

/* The newest time and mode queued above for the directory path, or mode
 * for the file path (mbfs_wbq_chmod), if any, into st: until it lands,
 * the batches before it (their renames) would show moving the
 * directory's mtime, and a listing from the sandbox the old mode. For
 * getattr; no lock held. */
void mbfs_wbq_apply_dir_time(struct mbfs *fs, const char *path,
			     struct stat *st);

/* An entry of path's directory is made, removed or renamed now, after a
 * time was queued above for that directory: the directory's mtime is to
 * be now. A change made on the guest moves it itself, so a queued time is
 * dropped (batch.c sets it before the change); after one made here alone
 * (local, true: a queued file renamed or removed), which may never reach
 * the guest, or while a batch carrying the old time is on its way (it
 * lands after the change), the time becomes now, queued behind
 * everything. Never waits. */
void mbfs_wbq_parent_changes(struct mbfs *fs, const char *path, bool local);

/* path was made here with attributes st (mkdir(2)): queue its mkdir
 * (mode st's permission bits) and show it (newdir.h) until it lands. The
 * batch makes it before the files in it; a failure is reported as a
 * failed file's (log, control file, the next sync) and the files in it
 * are kept. false when refused (stopped, no memory, a name a batch cannot
 * carry): make it now. Called without node locks. */
bool mbfs_wbq_mkdir(struct mbfs *fs, const char *path, const struct stat *st);

/* The directory path gets permission bits perm: given to its queued
 * mkdir, or queued behind what is queued (best effort, like a directory
 * time: a directory gone by then keeps nothing). getattr shows it from
 * now (mbfs_wbq_apply_dir_time). false when refused: chmod it now. */
bool mbfs_wbq_dir_mode(struct mbfs *fs, const char *path, unsigned perm);

/* path is removed here (unlink, or rmdir of a directory the mount knows
 * is empty), and the removal travels in order with the rest (wbsend.h):
 * first in its batch, guarded by base (the file's size and mtime as the
 * mount knew them; NULL: none) so that a file changed on the sandbox
 * meanwhile stays (a conflict, reported). A directory made here and not
 * sent yet is simply dropped from the queue. Until it lands the path
 * shows as gone (gone.h, view.h); a failure is reported as a batch's and
 * the path shows again as the sandbox has it. false when refused
 * (stopped, no memory, a name a batch cannot carry): remove it now. */
bool mbfs_wbq_remove(struct mbfs *fs, const char *path, bool dir,
		     const struct stat *base);

/* The file from (attributes st, as the mount shows it) is renamed over
 * to here, and the move travels in order with the rest, as a removal
 * does (wbsend.h). Until it lands from shows as gone (gone.h) and to as
 * st (newdir.h), with no request; a change of either on the guest that
 * is not a batch sends it first (mbfs_wbq_need_dir), as does an open of
 * to (its data is still under from there). A failure is reported as a
 * batch's, and both names show again as the sandbox has them. false when
 * refused (stopped, no memory, a name a batch cannot carry): rename it
 * now. For a regular file no one holds open; called without node
 * locks. */
bool mbfs_wbq_move(struct mbfs *fs, const char *from, const char *to,
		   const struct stat *st);

/* The file path (a regular file no one holds open, as the sandbox has it:
 * base, whose size and mtime it must still have there, else the chmod is
 * refused as a conflict) gets permission bits perm here, and the chmod
 * travels in order with the removals and moves (wbsend.h): the cache shows perm from now on (the caller sets it), and
 * a queued one is shown over what the sandbox says until it lands
 * (mbfs_wbq_apply_dir_time). A failure is reported as a batch's, and the
 * sandbox's mode shows again. false when refused: chmod it now. */
bool mbfs_wbq_chmod(struct mbfs *fs, const char *path, unsigned perm,
		    const struct stat *base);

/* Before a change of path on the guest that is not a batch (a symlink, a
 * large upload, a rename): a queued mkdir at or above path, and a queued
 * removal or move at, below or above it, are sent first, and this waits
 * for them. 0, or -EIO when the mkdir failed (the guest has no such
 * directory; the failure is reported as a batch's) or they could not be
 * sent (the sandbox does not answer: they stay queued, and what would
 * overtake them must not go). Never with a node lock held (the flusher
 * takes node locks). Returns at once when nothing of the kind is
 * queued. */
int mbfs_wbq_need_dir(struct mbfs *fs, const char *path);

/* Before path's bytes are read from the guest (an open): a queued move
 * of a file onto path lands first, and this waits for it (its bytes are
 * under the old name there until then). need_dir's returns; at once
 * when none is queued. */
int mbfs_wbq_need_moved(struct mbfs *fs, const char *path);

/* Is n in the queue (queued, or in a batch being sent)? */
bool mbfs_wbq_holds(struct mbfs *fs, const struct mbfs_node *n);
/* n is queued and its batch not formed yet (nodes_lock may be held). */
bool mbfs_wbq_queued(struct mbfs *fs, const struct mbfs_node *n);
/* n is in a batch being sent. */
bool mbfs_wbq_busy(struct mbfs *fs, const struct mbfs_node *n);
/* Wait while n is in a batch being sent. */
void mbfs_wbq_wait_idle(struct mbfs *fs, const struct mbfs_node *n);

/* Send n now if queued, and wait until it is neither queued nor in
 * flight, or a try could not reach the sandbox (it stays queued, see
 * mbfs_wbq_holds). Its outcome is in the node (kept on failure). */
void mbfs_wbq_flush_node(struct mbfs *fs, struct mbfs_node *n);

/* The same for every queued file that `which` (MBFS_BATCH_SELF, _BELOW,
 * _PARENT, _CHILDREN of batch.h) selects relative to path, and every
 * queued mkdir at or above path. 0, -EIO when one of them failed, or
 * -EAGAIN when a try could not reach the sandbox (they stay queued and
 * go, in order, when it answers). */
int mbfs_wbq_flush(struct mbfs *fs, const char *path, unsigned which);

/* Before a new file is made: each queued file keeps its working copy
 * open, so while the queue holds more than the limit of open files allows
 * (a cp -r of 20,000 files under ulimit -n 1024), wait for batches to
 * land, at most op_timeout, and not during an outage. No lock held. */
void mbfs_wbq_room(struct mbfs *fs);

/* For flush's which: only the removals at, below or above path. */
#define MBFS_WBQ_REMOVALS 0x100u

/* Before a queued file takes a new name here (a rename or link of a
 * fresh node): a removal queued for that name would land after the file,
 * which was queued before it, and remove it; so it is sent first (with
 * what was queued before it) and waited for. flush's returns. */
int mbfs_wbq_flush_removals(struct mbfs *fs, const char *path);

/* Wait until no batch is in flight: before a change on the guest that a
 * batch sent earlier must not land after (a file of it may have been
 * renamed or hidden here since it was taken). */
void mbfs_wbq_settle(struct mbfs *fs);

/* Send everything queued and wait. -EIO when a file failed in this or any
 * batch since the last sync; -EEXIST when each such file failed as a
 * conflict (the sandbox's file changed since the mount's copy was made:
 * the sandbox keeps its version, kept/ the mount's); else 0. */
int mbfs_wbq_sync(struct mbfs *fs);

/* An upload on its own (a file too large for a batch: upload.c) of bytes
 * starts; it is pending (mbfs_wbq_json) until the matching _end, whose rc
 * is the upload's (0 or -errno; conflict: refused because the guest's
 * file changed since the copy was made, and kept). May be called with
 * node->lock held. */
void mbfs_wbq_upload_begin(struct mbfs *fs, uint64_t bytes);
void mbfs_wbq_upload_end(struct mbfs *fs, uint64_t bytes, int rc,
			 bool conflict);
/* Wait until no upload on its own runs (or the generation is gone): for
 * the control file's "sync". -EIO when one of those ended meanwhile
 * failed, -EEXIST when each was a conflict, else 0. Never with a node
 * lock held. */
int mbfs_wbq_upload_wait(struct mbfs *fs);

/* count files (the last one path) could not be sent (why): the next
 * mbfs_wbq_sync returns -EIO (-EEXIST: conflict, each kept because the
 * sandbox's file changed since) and the control file says so. For a
 * recovery that kept files (recover.c). */
void mbfs_wbq_note_failed(struct mbfs *fs, size_t count, const char *path,
			  const char *why, bool conflict);

/* The queue for the control file: {"pendingFiles","pendingDirs" (mkdirs),
 * "pendingBytes" (queued, in flight or uploading, not PUT yet),
 * "inFlightFiles", "uploadingFiles","uploadingBytes","uploadingSentBytes"
 * (uploads on their own), "sentFiles","sentBatches","sentBytes",
 * "failedFiles","waiting","retries", "inFlightMs" (how long the batch in
 * flight has waited for its answer, 0 when none), "lastError"} (totals
 * since mount; malloc'd JSON object text), or NULL without memory. */
char *mbfs_wbq_json(struct mbfs *fs);

#endif
