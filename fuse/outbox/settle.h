/* settle.h: the outbox's one barrier.
 *
 * Most changes go in the outbox and need none: they travel in order with
 * what is queued. A change made on the sandbox at once (a command, a
 * request) must not overtake what is queued for the paths it touches, nor
 * be overtaken by it: mbfs_outbox_settle(path, scope) sends what scope
 * selects for path, and waits for it, in one fixed order (removals, the
 * directories above, the files, the batches in flight, the times), then
 * says that path's directory changes now. A namespace operation calls it
 * once per path it touches. mbfs_wbq_sync (wbq.h) is the other end: all of
 * it. Never with a node lock held (the flusher takes node locks).
 */
#ifndef MBFS_SETTLE_H
#define MBFS_SETTLE_H

struct mbfs;

/* Scope bits. */
#define MBFS_SETTLE_REMOVALS    0x001u /* only queued removals and moves at,
                                          below or above path */
#define MBFS_SETTLE_MOVED_HERE  0x400u /* only a queued move of a file onto
                                          path (its bytes are under the
                                          old name until it lands) */
#define MBFS_SETTLE_DIRS        0x002u /* mkdirs at or above path, and
                                          removals and moves at, below or
                                          above it (mbfs_wbq_need_dir) */
#define MBFS_SETTLE_FILE        0x004u /* copies of path queued */
#define MBFS_SETTLE_FILES_BELOW 0x008u /* copies of files below path */
#define MBFS_SETTLE_CHILDREN    0x800u /* copies of the entries of the
                                          directory path */
#define MBFS_SETTLE_INFLIGHT    0x010u /* and every batch in flight landed */
#define MBFS_SETTLE_TIMES       0x020u /* times queued for path */
#define MBFS_SETTLE_TIMES_BELOW 0x040u /* ... for what is below it */
#define MBFS_SETTLE_TIMES_PARENT 0x080u /* ... for its directory */
#define MBFS_SETTLE_CHANGE      0x100u /* then: path's directory changes on
                                          the sandbox now (a time queued
                                          for it gives way) */
#define MBFS_SETTLE_STRICT      0x200u /* a file or time that could not be
                                          sent fails it too */

/* A new name at path, made on the sandbox now (mkdir, symlink, link). */
#define MBFS_SETTLE_NEW_NAME \
	(MBFS_SETTLE_DIRS | MBFS_SETTLE_TIMES_PARENT | MBFS_SETTLE_CHANGE)
/* path and what is below it go, or are replaced, on the sandbox now. */
#define MBFS_SETTLE_GONE \
	(MBFS_SETTLE_DIRS | MBFS_SETTLE_FILE | MBFS_SETTLE_FILES_BELOW | \
	 MBFS_SETTLE_INFLIGHT | MBFS_SETTLE_TIMES | MBFS_SETTLE_TIMES_BELOW | \
	 MBFS_SETTLE_TIMES_PARENT | MBFS_SETTLE_CHANGE)

/* 0; -EIO when a queued mkdir above path failed or the removals and
 * directories scope selects could not be sent (the sandbox does not
 * answer: they stay queued, and the caller must not overtake them). A file
 * that failed is kept and reported as its batch's; files and times that
 * could not be sent are left queued (times: logged), and the caller goes
 * on, unless STRICT: then -EIO for files, the time's -errno. */
int mbfs_outbox_settle(struct mbfs *fs, const char *path, unsigned scope);

#endif
