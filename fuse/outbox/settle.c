/* settle.c: the outbox's one barrier (settle.h). */
#include <errno.h>

#include "fuse/mbfs.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/pathsel.h"
#include "fuse/outbox/settle.h"
#include "fuse/outbox/wbq.h"

int mbfs_outbox_settle(struct mbfs *fs, const char *path, unsigned scope)
{
	int rc = 0;
	if ((scope & MBFS_SETTLE_REMOVALS) &&
	    mbfs_wbq_flush_removals(fs, path) == -EAGAIN)
		return -EIO;
	if ((scope & MBFS_SETTLE_MOVED_HERE) && mbfs_wbq_need_moved(fs, path))
		return -EIO;
	if (scope & MBFS_SETTLE_DIRS) {
		rc = mbfs_wbq_need_dir(fs, path);
		if (rc)
			return rc;
	}
	unsigned files = ((scope & MBFS_SETTLE_FILE) ? MBFS_BATCH_SELF : 0) |
			 ((scope & MBFS_SETTLE_FILES_BELOW) ? MBFS_BATCH_BELOW : 0) |
			 ((scope & MBFS_SETTLE_CHILDREN) ? MBFS_BATCH_CHILDREN : 0);
	/* a failed copy is kept and reported as its batch's; the change
	 * goes on, as on a local disk after a failed write-back */
	if (files && mbfs_wbq_flush(fs, path, files) == -EAGAIN &&
	    (scope & MBFS_SETTLE_STRICT))
		return -EIO;
	if (scope & MBFS_SETTLE_INFLIGHT)
		mbfs_wbq_settle(fs);
	unsigned times = ((scope & MBFS_SETTLE_TIMES) ? MBFS_BATCH_SELF : 0) |
			 ((scope & MBFS_SETTLE_TIMES_BELOW) ? MBFS_BATCH_BELOW : 0) |
			 ((scope & MBFS_SETTLE_TIMES_PARENT) ? MBFS_BATCH_PARENT : 0);
	if (times) {
		int trc = mbfs_batch_flush(fs, path, times);
		if (trc && (scope & MBFS_SETTLE_STRICT))
			return trc;
	}
	if (scope & MBFS_SETTLE_CHANGE)
		mbfs_wbq_parent_changes(fs, path, false);
	return rc;
}
