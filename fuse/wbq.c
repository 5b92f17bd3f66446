/* wbq.c: the write-back queue and its flusher thread (see wbq.h).
 *
 * The queue is a list in arrival order; an entry holds a reference to its
 * node and stays in the list, in flight, while its batch is sent, so
 * waiters can tell it from a file that is done. Nodes are read through
 * node_int.h (path and size under nodes_lock) and taken and settled
 * through wbnode.c, which owns what a batch does to a node; the entries
 * of directories are made and shown by wbq_dir.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/gone.h"
#include "fuse/mbfs.h"
#include "fuse/node.h"
#include "fuse/node_int.h"
#include "fuse/wbq.h"
#include "fuse/wbq_int.h"
#include "fuse/wbsend.h"

struct mbfs_wbq *mbfs_wbq_new(void)
{
	struct mbfs_wbq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&q->lock, NULL);
	q->tail = &q->head;
	return q;
}

void mbfs_wbq_free(struct mbfs_wbq *q)
{
	if (!q)
		return;
	/* entries left only when never started or stopped early: their
	 * nodes are freed with the rest (mbfs_node_free_all) */
	while (q->head) {
		struct mbfs_wbq_entry *e = q->head->next;
		if (q->head->n)
			q->head->n->wbq = NULL;
		free(q->head->dpath);
		free(q->head);
		q->head = e;
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* ---- sending one batch ---- */

static void note_failure(struct mbfs_wbq *q, size_t count, const char *path,
			 const char *why)
{
	q->failed_files += count;
	snprintf(q->last_error, sizeof(q->last_error), "'%.80s': %.160s", path,
		 why);
}

/* Could the batch not reach the sandbox for a reason that passes (the
 * service unreachable or failing, no room here for the journal)? Then it
 * goes again later; a refusal or a sandbox gone for good does not. */
static bool may_retry(int rc, const struct mb_err *err)
{
	return rc && (mb_err_is_transient(err) || err->errnum == ENOSPC ||
		      err->errnum == EDQUOT || rc == -ENOSPC);
}

/* The batch of k entries (ev) in flight could not reach the sandbox:
 * each goes back in the queue where it was, nothing is kept or counted
 * as failed, and the next try waits (1, 2, 4 ... 30 s; a waiter's
 * fsync or sync tries at once). Its files' data (fv, nf) are freed. Lock
 * not held; held on return. */
static void retry_later(struct mbfs_wbq *q, struct mbfs_wbfile *fv,
			size_t nf, size_t k, uint64_t bytes,
			const struct mb_err *err)
{
	for (size_t i = 0; i < nf; i++) {
		free(fv[i].path);
		free(fv[i].data);
	}
	pthread_mutex_lock(&q->lock);
	uint64_t now = mb_now_ms();
	q->inflight -= k;
	q->inflight_bytes -= bytes;
	for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (!e->inflight)
			continue;
		e->inflight = e->again = false;
		e->since_ms = now;
		q->queued++;
		q->queued_bytes += e->bytes;
	}
	unsigned s = q->retry_streak < 5 ? q->retry_streak : 5;
	uint64_t wait = (1000u << s) < 30000u ? (1000u << s) : 30000u;
	if (!q->retry_streak++)
		mb_log(MB_LOG_WARN, "write-back: the sandbox cannot be reached "
		       "(%s); %zu queued change%s wait, in order, and go when "
		       "it answers", err->msg[0] ? err->msg : "no answer",
		       q->queued, q->queued == 1 ? "" : "s");
	q->retries++;
	q->retry_at = now + wait;
	snprintf(q->last_error, sizeof(q->last_error), "waiting for the "
		 "sandbox: %.200s", err->msg[0] ? err->msg : "no answer");
	pthread_cond_broadcast(&q->cond);
}

/* Take the oldest queued entries (up to the batch limits), send them and
 * settle them. Lock held; dropped meanwhile. */
static void send_locked(struct mbfs *fs, struct mbfs_wbq *q)
{
	size_t k = 0;
	uint64_t bytes = 0, now = mb_now_ms();
	bool skipped = false, others = false;
	for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (e->inflight)
			continue;
		/* just closed: a rename or link of it (an editor's save, a
		 * git object) usually follows at once and is cheaper here */
		if (e->n && !e->urgent && !q->stop &&
		    now < e->since_ms + MBFS_WBQ_MIN_AGE_MS) {
			skipped = true;
			continue;
		}
		/* a removal goes first in its batch (wbsend.h): it starts
		 * one, or waits for the next, and overtakes nothing */
		if (!e->n && mbfs_wbdir_removes(e->kind) &&
		    (skipped || others))
			break;
		/* a directory's time or mode never overtakes a file queued
		 * before it; a mkdir may (nothing queued before it is in it) */
		if (!e->n && e->kind != MBFS_WBDIR_MAKE && skipped)
			continue;
		if (k && (k >= MBFS_WBQ_BATCH_FILES ||
			  bytes + e->bytes > MBFS_WBQ_BATCH_MAX))
			break;
		e->inflight = true;
		e->urgent = false;
		others = others || e->n || !mbfs_wbdir_removes(e->kind);
		bytes += e->bytes;
		k++;
	}
	if (!k)
		return;
	struct mbfs_wbq_entry **ev = malloc(k * sizeof(*ev));
	struct mbfs_wbfile *fv = calloc(k, sizeof(*fv));
	struct mbfs_wbdir *dv = calloc(k, sizeof(*dv));
	size_t *fe = malloc(k * sizeof(*fe)), *up = malloc(k * sizeof(*up));
	if (!ev || !fv || !dv || !fe || !up) {
		for (struct mbfs_wbq_entry *e = q->head; e; e = e->next)
			e->inflight = false;
		free(ev);
		free(fv);
		free(dv);
		free(fe);
		free(up);
		return;   /* the flusher tries again after its delay */
	}
	size_t i = 0, nd = 0;
	for (struct mbfs_wbq_entry *e = q->head; e && i < k; e = e->next) {
		if (!e->inflight)
			continue;
		ev[i++] = e;
		if (!e->n) {   /* the entry keeps the path while in flight */
			dv[nd].path = e->dpath;
			dv[nd].kind = e->kind;
			dv[nd].mode = e->dmode;
			dv[nd].base_known = e->base_known;
			dv[nd].base_size = e->base_size;
			dv[nd].base_mtime = e->base_mtime;
			dv[nd++].mtime = e->dtime;
		}
	}
	q->queued -= k;
	q->queued_bytes -= bytes;
	q->inflight += k;
	q->inflight_bytes += bytes;
	pthread_mutex_unlock(&q->lock);

	/* take each node's data now; one that cannot travel in a batch
	 * (grown too large, a name tar cannot hold) is uploaded after it,
	 * once the directories it makes are there */
	size_t nf = 0, nup = 0, failed = 0, bfailed = 0;
	char first_fail[MB_PATH_MAX] = "", first_why[200] = "";
	for (i = 0; i < k; i++) {
		if (!ev[i]->n)
			continue;
		int r = mbfs_node_wb_take(fs, ev[i]->n, &fv[nf]);
		if (r > 0)
			fe[nf++] = i;
		else if (r < 0)
			up[nup++] = i;
	}
	struct mb_err err;
	mb_err_clear(&err);
	int rc = 0;
	uint64_t sent = 0;
	if (nf || nd) {
		/* times queued for these files or their directories land
		 * first: the batch moves both mtimes */
		for (i = 0; i < nf; i++)
			mbfs_batch_flush(fs, fv[i].path,
					 MBFS_BATCH_SELF | MBFS_BATCH_PARENT);
		rc = mbfs_wbsend(fs, fv, nf, dv, nd, &err);
	}
	if (may_retry(rc, &err)) {
		retry_later(q, fv, nf, k, bytes, &err);
		free(ev);
		free(fv);
		free(dv);
		free(fe);
		free(up);
		return;
	}
	/* the removals went first, and so are told first: a file of the
	 * batch may be at a removed name again; one the sandbox refused
	 * shows again */
	for (i = 0; i < nd; i++) {
		if (!mbfs_wbdir_removes(dv[i].kind))
			continue;
		if (rc) {
			dv[i].rc = rc;
			snprintf(dv[i].why, sizeof(dv[i].why), "%.150s", err.msg);
		}
		mbfs_wbq_dir_landed(fs, &dv[i]);
		/* done or refused there: the view shows what the sandbox has
		 * (a mkdir of the batch may show the name again at once) */
		for (size_t j = 0; j < k; j++) {
			if (!ev[j]->n && ev[j]->dpath == dv[i].path) {
				mbfs_gone_remove(fs->gone, dv[i].path);
				ev[j]->landed = true;
			}
		}
		if (dv[i].rc && !failed++) {
			snprintf(first_fail, sizeof(first_fail), "%s", dv[i].path);
			snprintf(first_why, sizeof(first_why), "%.190s", dv[i].why);
		}
	}
	/* the directories made first: what the batch put in them is told
	 * to the cache after their (empty) listings */
	for (i = 0; i < nd; i++) {
		if (dv[i].kind != MBFS_WBDIR_MAKE)
			continue;
		int drc = rc ? rc : dv[i].rc;
		const char *why = rc ? err.msg : dv[i].why;
		mbfs_wbq_made(fs, dv[i].path, drc, why);
		if (drc && !failed++) {
			snprintf(first_fail, sizeof(first_fail), "%s", dv[i].path);
			snprintf(first_why, sizeof(first_why), "%.190s", why);
		}
	}
	for (i = 0; i < nf; i++) {
		struct mbfs_wbfile *f = &fv[i];
		int frc = rc ? rc : f->rc;
		const char *why = rc ? err.msg : f->why;
		mbfs_node_wb_done(fs, ev[fe[i]]->n, f, frc, why);
		if (frc)
			bfailed++;
		if (frc && !failed++) {
			snprintf(first_fail, sizeof(first_fail), "%s", f->path);
			snprintf(first_why, sizeof(first_why), "%.190s", why);
		}
		if (!frc)
			sent += f->len;
		free(f->path);
		free(f->data);
	}
	/* the files' renames moved these directories' mtimes, then the
	 * batch set them: what the cache assumed after the files is wrong */
	for (i = 0; i < nd && !rc; i++)
		if (!mbfs_wbdir_removes(dv[i].kind))
			mbfs_wbq_dir_landed(fs, &dv[i]);
	/* those uploaded on their own are counted by their upload
	 * meanwhile (wbq_up.c), not twice */
	uint64_t upbytes = 0;
	for (i = 0; i < nup; i++)
		upbytes += ev[up[i]]->bytes;
	if (nup) {
		pthread_mutex_lock(&q->lock);
		q->inflight -= nup;
		q->inflight_bytes -= upbytes;
		pthread_mutex_unlock(&q->lock);
	}
	for (i = 0; i < nup; i++) {
		int urc = mbfs_node_wb_upload(fs, ev[up[i]]->n);
		if (urc && !failed++) {
			mbfs_node_get_path(fs, ev[up[i]]->n, first_fail);
			snprintf(first_why, sizeof(first_why), "%s",
				 strerror(-urc));
		}
	}
	free(fv);
	free(dv);
	free(fe);
	free(up);

	struct mbfs_node **drop = malloc(k * sizeof(*drop));
	size_t ndrop = 0;
	pthread_mutex_lock(&q->lock);
	q->inflight -= k - nup;
	q->inflight_bytes -= bytes - upbytes;
	if (nf || nd)
		q->sent_batches++;
	if ((nf || nd) && !rc && q->retry_streak) {
		mb_log(MB_LOG_INFO, "write-back: the sandbox answers again");
		q->retry_streak = 0;
		q->retry_at = 0;
	}
	q->sent_files += nf - bfailed;
	q->sent_bytes += sent;
	if (failed)
		note_failure(q, failed, first_fail, first_why);
	/* one batch in flight at a time: what is in flight is this one's */
	struct mbfs_wbq_entry **pp = &q->head;
	while (*pp) {
		struct mbfs_wbq_entry *e = *pp;
		if (!e->inflight) {
			pp = &e->next;
			continue;
		}
		if (e->n && (e->again || !drop)) {
			/* changed and closed again meanwhile: it goes in a
			 * later batch, with the same reference */
			e->inflight = e->again = false;
			e->since_ms = mb_now_ms();
			q->queued++;
			q->queued_bytes += e->bytes;
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (e->n) {
			e->n->wbq = NULL;
			drop[ndrop++] = e->n;
			free(e);
		} else {
			mbfs_wbq_drop_dir_locked(fs, q, e);
		}
	}
	q->tail = pp;
	free(ev);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	/* the queue's references; the last one of a node lets it go */
	for (i = 0; i < ndrop; i++)
		mbfs_node_release(fs, drop[i]);
	free(drop);
	pthread_mutex_lock(&q->lock);
}

/* ---- the flusher ---- */

/* When the queue is due (ms), or 0 when nothing is queued. */
static uint64_t due_ms(const struct mbfs_wbq *q)
{
	if (!q->queued)
		return 0;
	if (q->retry_at && q->stop)
		return 0;   /* disconnected at the end: the journal keeps it */
	for (const struct mbfs_wbq_entry *e = q->head; e; e = e->next)
		if (!e->inflight && e->urgent)
			return 1;   /* someone waits: a try now */
	if (q->retry_at)
		return q->retry_at;
	if (q->queued_bytes >= MBFS_WBQ_BATCH_BYTES || q->stop)
		return 1;
	uint64_t due = 0;
	for (const struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (e->inflight)
			continue;
		if (e->urgent)
			return 1;
		if (!due)
			due = e->since_ms + MBFS_WBQ_DELAY_MS;
	}
	return due;
}

static void *flusher(void *arg)
{
	struct mbfs *fs = arg;
	struct mbfs_wbq *q = fs->wbq;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		uint64_t due = due_ms(q), now = mb_now_ms();
		if (!due && q->stop)
			break;
		if (!due) {
			pthread_cond_wait(&q->cond, &q->lock);
		} else if (now < due) {
			struct timespec ts = {
				.tv_sec = (time_t)(due / 1000),
				.tv_nsec = (long)(due % 1000) * 1000000L,
			};
			pthread_cond_timedwait(&q->cond, &q->lock, &ts);
		} else {
			size_t before = q->queued;
			send_locked(fs, q);
			if (q->queued && q->queued == before && !q->inflight) {
				/* nothing could be taken (no memory): later */
				uint64_t t = mb_now_ms() + MBFS_WBQ_DELAY_MS;
				struct timespec ts = {
					.tv_sec = (time_t)(t / 1000),
					.tv_nsec = (long)(t % 1000) * 1000000L,
				};
				pthread_cond_timedwait(&q->cond, &q->lock, &ts);
			}
		}
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

void mbfs_wbq_stop(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	bool running = q->running;
	q->stop = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	if (running)
		pthread_join(q->thread, NULL);
	mbfs_wbsend_finish(fs);   /* a recovery's batches too (recover.c) */
	pthread_mutex_lock(&q->lock);
	q->running = false;
	pthread_mutex_unlock(&q->lock);
}

/* ---- the interface ---- */

void mbfs_wbq_append_locked(struct mbfs_wbq *q, struct mbfs_wbq_entry *e)
{
	e->since_ms = mb_now_ms();
	e->next = NULL;
	*q->tail = e;
	q->tail = &e->next;
	if (e->n)
		e->n->wbq = e;
	q->queued++;
}

void mbfs_wbq_start_locked(struct mbfs *fs, struct mbfs_wbq *q)
{
	if (!q->stop && !q->running &&
	    pthread_create(&q->thread, NULL, flusher, fs) == 0)
		q->running = true;
}

bool mbfs_wbq_add(struct mbfs *fs, struct mbfs_node *n, uint64_t bytes)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	/* the reference first: nodes_lock comes before the queue's lock
	 * (the caller holds one, so dropping it again is never the last) */
	mbfs_node_ref(fs, n);
	bool queued = false, extra = true;
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	struct mbfs_wbq_entry *e = q->stop || !q->running ? NULL : n->wbq;
	if (q->stop || !q->running) {
		/* refused: the caller uploads */
	} else if (e && e->inflight) {
		e->again = true;
		e->bytes = bytes;
		queued = true;
	} else if (e) {
		q->queued_bytes += bytes - e->bytes;
		e->bytes = bytes;
		queued = true;
	} else if ((e = calloc(1, sizeof(*e)))) {
		e->n = n;
		e->bytes = bytes;
		mbfs_wbq_append_locked(q, e);
		q->queued_bytes += bytes;
		queued = true;
		extra = false;
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	if (extra)
		mbfs_node_release(fs, n);
	return queued;
}

bool mbfs_wbq_busy(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	pthread_mutex_lock(&q->lock);
	struct mbfs_wbq_entry *e = n->wbq;
	bool busy = e && e->inflight;
	pthread_mutex_unlock(&q->lock);
	return busy;
}

bool mbfs_wbq_holds(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	pthread_mutex_lock(&q->lock);
	bool held = n->wbq != NULL;
	pthread_mutex_unlock(&q->lock);
	return held;
}

bool mbfs_wbq_queued(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	pthread_mutex_lock(&q->lock);
	struct mbfs_wbq_entry *e = n->wbq;
	bool queued = e && !e->inflight && !q->stop;
	pthread_mutex_unlock(&q->lock);
	return queued;
}

void mbfs_wbq_wait_idle(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	for (struct mbfs_wbq_entry *e; (e = n->wbq) && e->inflight;)
		pthread_cond_wait(&q->cond, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

void mbfs_wbq_flush_node(struct mbfs *fs, struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	uint64_t retries0 = q->retries;
	for (struct mbfs_wbq_entry *e; (e = n->wbq) && q->running &&
	     q->retries == retries0;) {
		if (!e->inflight) {
			e->urgent = true;
			pthread_cond_broadcast(&q->cond);
		}
		pthread_cond_wait(&q->cond, &q->lock);
	}
	pthread_mutex_unlock(&q->lock);
}

/* Must e land before a change of path on the guest (flush's which)?
 * nodes_lock held. */
static bool selects(const struct mbfs_wbq_entry *e, const char *path, unsigned which)
{
	if (which & MBFS_WBQ_REMOVALS)
		return !e->n && mbfs_wbdir_removes(e->kind) &&
		       (mbfs_path_at_or_below(path, e->dpath) ||
			mbfs_path_at_or_below(e->dpath, path));
	if (e->n)
		return mbfs_path_selects(e->n->path, path, which);
	switch (e->kind) {
	case MBFS_WBDIR_MAKE:   /* anything at or below it needs it */
		return mbfs_path_selects(path, e->dpath,
					  MBFS_BATCH_SELF | MBFS_BATCH_BELOW) ||
		       mbfs_path_selects(e->dpath, path, which);
	case MBFS_WBDIR_RM:
	case MBFS_WBDIR_RMDIR:
		/* anything made at or below it, or a move or removal of
		 * what holds it, comes after it */
		return mbfs_path_at_or_below(path, e->dpath) ||
		       mbfs_path_at_or_below(e->dpath, path);
	case MBFS_WBDIR_MODE:   /* it would miss the path moved or gone */
		return strcmp(e->dpath, path) == 0 ||
		       mbfs_path_selects(e->dpath, path, which);
	default:
		/* a directory time goes first only before what is below
		 * it is removed or moved (batch.c has it too and follows
		 * renames; nothing else waits for it) */
		return (which & MBFS_BATCH_BELOW) &&
		       mbfs_path_selects(e->dpath, path, which);
	}
}

int mbfs_wbq_flush(struct mbfs *fs, const char *path, unsigned which)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return 0;
	uint64_t failed0, retries0;
	pthread_mutex_lock(&q->lock);
	failed0 = q->failed_files;
	retries0 = q->retries;
	pthread_mutex_unlock(&q->lock);
	for (;;) {
		bool any = false;
		pthread_mutex_lock(&fs->nodes_lock);
		pthread_mutex_lock(&q->lock);
		for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
			if (!path || selects(e, path, which)) {
				any = true;
				if (!e->inflight)
					e->urgent = true;
			}
		}
		pthread_mutex_unlock(&fs->nodes_lock);
		if (any && (!q->running || q->retries != retries0)) {
			/* no flusher to send them (stopped), or the sandbox
			 * cannot be reached: they stay queued, not waited for */
			pthread_mutex_unlock(&q->lock);
			return -EAGAIN;
		}
		if (any) {
			pthread_cond_broadcast(&q->cond);
			pthread_cond_wait(&q->cond, &q->lock);
		}
		bool failed = q->failed_files != failed0;
		pthread_mutex_unlock(&q->lock);
		if (!any)
			return failed ? -EIO : 0;
	}
}

int mbfs_wbq_flush_removals(struct mbfs *fs, const char *path)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->lock);
	bool any = q->removes > 0;
	pthread_mutex_unlock(&q->lock);
	return any ? mbfs_wbq_flush(fs, path, MBFS_WBQ_REMOVALS) : 0;
}

void mbfs_wbq_settle(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	while (q->inflight)
		pthread_cond_wait(&q->cond, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

void mbfs_wbq_note_failed(struct mbfs *fs, size_t count, const char *path,
			  const char *why)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	note_failure(q, count, path, why);
	pthread_mutex_unlock(&q->lock);
}

int mbfs_wbq_sync(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return 0;
	int frc = mbfs_wbq_flush(fs, NULL, 0);
	pthread_mutex_lock(&q->lock);
	int rc = q->failed_files != q->failed_reported || frc == -EAGAIN
		 ? -EIO : 0;
	q->failed_reported = q->failed_files;
	pthread_mutex_unlock(&q->lock);
	return rc;
}

char *mbfs_wbq_json(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	char *s = NULL, esc[2 * sizeof(q->last_error) + 8];
	size_t n = 0;
	if (!q)
		return NULL;
	pthread_mutex_lock(&q->lock);
	/* directory entries are not files; their mkdirs are counted apart */
	size_t dirs = 0, dirs_inflight = 0, mkdirs = 0, removes = 0;
	for (const struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		dirs += !e->n;
		dirs_inflight += !e->n && e->inflight;
		mkdirs += !e->n && e->kind == MBFS_WBDIR_MAKE;
		removes += !e->n && mbfs_wbdir_removes(e->kind);
	}
	/* last_error: a path and a message; escape what JSON needs */
	for (const char *p = q->last_error; *p && n + 8 < sizeof(esc); p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			esc[n++] = '\\';
			esc[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(esc + n, sizeof(esc) - n, "\\u%04x", c);
		} else {
			esc[n++] = (char)c;
		}
	}
	esc[n] = '\0';
	/* parts PUT of uploads on their own are on the sandbox already,
	 * though not in place yet */
	uint64_t up_sent = atomic_load(&fs->up_sent);
	if (up_sent > q->up_bytes)
		up_sent = q->up_bytes;
	if (asprintf(&s, "{\"pendingFiles\":%zu,\"pendingDirs\":%zu,"
		     "\"pendingRemoves\":%zu,"
		     "\"pendingBytes\":%" PRIu64
		     ",\"inFlightFiles\":%zu,\"uploadingFiles\":%zu"
		     ",\"uploadingBytes\":%" PRIu64 ",\"uploadingSentBytes\":%" PRIu64
		     ",\"sentFiles\":%" PRIu64 ",\"sentBatches\":%" PRIu64
		     ",\"sentBytes\":%" PRIu64 ",\"failedFiles\":%" PRIu64
		     ",\"waiting\":%s,\"retries\":%" PRIu64
		     ",\"lastError\":\"%s\"}",
		     q->queued + q->inflight - dirs + q->up_files, mkdirs, removes,
		     q->queued_bytes + q->inflight_bytes + q->up_bytes - up_sent,
		     q->inflight - dirs_inflight, q->up_files, q->up_bytes, up_sent,
		     q->sent_files, q->sent_batches, q->sent_bytes,
		     q->failed_files, q->retry_at ? "true" : "false",
		     q->retries, esc) < 0)
		s = NULL;
	pthread_mutex_unlock(&q->lock);
	return s;
}
