/* xfer_ahead.c: a sequential reader's fetch of a large download's pieces
 * (xfer.h, mbfs_xfer_fetch_start): it returns once the pieces the read
 * needs are in and goes on in the background as p->fetch, growing as the
 * reader moves on, until stopped. The fetch itself (its workers, the
 * cuts) is xfer_pieces.c's; which pieces a read needs is load.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/api.h"
#include "common/err.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_fetch.h"
#include "fuse/transport/xfer_int.h"

static void *run_main(void *arg)
{
	struct fetch *f = arg;
	mbfs_xfer_parallel(MBFS_XFER_THREADS, mbfs_fetch_worker, f);
	pthread_mutex_lock(&f->lock);
	f->finished = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Is piece i among f's GETs? f->lock held. */
static bool listed(const struct fetch *f, size_t i)
{
	size_t lo = 0, hi = f->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->list[mid] < i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->count && f->list[lo] == i;
}

/* Wait until piece i is in (1) or f will not bring it (0), at most until
 * the waiting operation's deadline (bound.c): the fetch runs on in its
 * thread, with op_timeout per call, but no read waits for it longer than
 * its own op_timeout. */
static int wait_piece(struct fetch *f, size_t i)
{
	uint64_t deadline = mb_op_current();
	pthread_mutex_lock(&f->lock);
	int got = 0;
	for (;;) {
		if (mbfs_fetch_in_fd(f->p, i)) {
			got = 1;
			break;
		}
		if (f->rc || f->stop || f->finished || !listed(f, i))
			break;
		if (!deadline) {
			pthread_cond_wait(&f->cv, &f->lock);
			continue;
		}
		uint64_t now = mb_now_ms();
		if (now >= deadline)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (deadline - now) * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&f->cv, &f->lock, &ts);
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

int mbfs_xfer_fetch_start(struct mbfs *fs, struct mbfs_pieces *p,
			  const size_t *idx, size_t count, size_t ahead,
			  size_t want, int fd, struct mb_err *err)
{
	if (!p->state)
		return mbfs_xfer_fetch(fs, p, idx, count, ahead, fd, err);
	int rc;
	struct fetch *f = mbfs_fetch_begin(fs, p, idx, count, ahead, fd, err,
					   &rc);
	if (!f)
		return rc;
	f->async = true;
	if (pthread_create(&f->t, NULL, run_main, f)) {
		/* no thread: all of it now, as mbfs_xfer_fetch */
		f->async = false;
		mbfs_xfer_parallel(MBFS_XFER_THREADS, mbfs_fetch_worker, f);
		return mbfs_fail(fs, mbfs_fetch_free(f, err), err);
	}
	p->fetch = f;
	for (size_t k = 0; !rc && k < want && k < count; k++)
		if (!wait_piece(f, f->list[k]))
			rc = -EIO;
	if (rc && mb_op_expired()) {
		mbfs_xfer_fetch_stop(p);
		return mbfs_fail(fs, mb_err_set(err, ETIMEDOUT, "a piece of '%s' "
				 "did not come within op_timeout", p->src), err);
	}
	if (rc) {
		mb_err_set(err, EIO, "a piece of '%s' did not come", p->src);
		rc = mbfs_xfer_fetch_end(fs, p, NULL, NULL, err);
		if (!rc)
			rc = mb_err_set(err, EIO, "a piece of '%s' did not "
					"come", p->src);
	}
	return rc;
}

int mbfs_xfer_fetch_wait(struct mbfs_pieces *p, size_t i)
{
	return p->fetch ? wait_piece(p->fetch, i) : 0;
}

void mbfs_xfer_fetch_grow(struct mbfs_pieces *p, size_t upto, size_t ahead)
{
	struct fetch *f = p->fetch;
	if (!f)
		return;
	if (upto > p->n - 1)
		upto = p->n - 1;
	pthread_mutex_lock(&f->lock);
	size_t last = f->list[f->count - 1];
	/* up to a piece in already (read before, out of order): a GET of
	 * it could find it removed from the guest */
	for (size_t i = last + 1; i <= upto; i++)
		if (mbfs_fetch_in_fd(p, i))
			upto = i - 1;
	/* the pieces to cut ahead move on in runs (one exec each), not one
	 * a read */
	size_t end = f->list[f->ext - 1];
	if (end < upto + MBFS_FETCH_CUT_AHEAD)
		end = upto + ahead > p->n - 1 ? p->n - 1 : upto + ahead;
	if (end < upto)
		end = upto;
	/* positions [count, ext) are last + 1 on: they stay */
	size_t want = f->count + (end - last);
	size_t *l = f->list;
	if (upto > last && want > f->cap)
		l = realloc(f->list, want * sizeof(*l));
	if (upto > last && l && !f->rc && !f->stop && !f->finished) {
		f->list = l;
		f->cap = want > f->cap ? want : f->cap;
		for (size_t k = f->ext; k < want; k++)
			f->list[k] = last + 1 + k - f->count;
		f->ext = want > f->ext ? want : f->ext;
		f->count += upto - last;
		mbfs_fetch_skip_cut(f);
		pthread_cond_broadcast(&f->cv);
	} else if (l) {
		f->list = l;
	}
	pthread_mutex_unlock(&f->lock);
}
