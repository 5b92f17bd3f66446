/* wbq_up.c: uploads on their own (wbq.h): a file too large for a batch
 * goes at close (or fsync, or when its batch cannot take it) in one PUT or
 * in parts; while it runs it is pending as much as a queued one, so the
 * queue counts it, the control file shows it and a sync waits for it. The
 * bytes already PUT are the transport's count (mbfs.h, up_sent). Does not
 * upload anything (upload.c, xfer_up.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fuse/mbfs.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_int.h"

void mbfs_wbq_upload_begin(struct mbfs *fs, uint64_t bytes)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->up_files++;
	q->up_bytes += bytes;
	pthread_mutex_unlock(&q->lock);
}

void mbfs_wbq_upload_end(struct mbfs *fs, uint64_t bytes, int rc,
			 bool conflict)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->up_files--;
	q->up_bytes -= bytes;
	q->up_failed += rc != 0 && !conflict;
	q->up_conflicts += rc != 0 && conflict;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

int mbfs_wbq_upload_wait(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->lock);
	uint64_t failed = q->up_failed, conflicts = q->up_conflicts;
	/* a stopped generation fails every upload soon: no need to wait */
	while (q->up_files && !atomic_load(&fs->stopped))
		pthread_cond_wait(&q->cond, &q->lock);
	int rc = q->up_failed != failed ? -EIO
		 : q->up_conflicts != conflicts ? -EEXIST : 0;
	pthread_mutex_unlock(&q->lock);
	return rc;
}
