/* wbq_send.c: the write-back flusher's one batch (wbq.h): which queued
 * entries go together, their data taken from the nodes, the send
 * (wbsend.h), and what each outcome does to the view, the nodes and the
 * queue; a batch that cannot reach the sandbox goes back in the queue. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/gone.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_int.h"
#include "fuse/outbox/wbsend.h"

/* One batch on its way: its entries (ev, in queue order), the files of
 * them that travel in it (fv; fe: their index in ev), the other names'
 * changes (dv), the files uploaded on their own after it (up), and the
 * first failure, for the log and the next sync. */
struct batch {
	struct mbfs_wbq_entry **ev;
	size_t k;
	uint64_t bytes;
	struct mbfs_wbfile *fv;
	size_t *fe, nf;
	struct mbfs_wbdir *dv;
	size_t nd;
	size_t *up, nup;
	uint64_t upbytes, sent;
	size_t failed, bfailed;
	uint64_t fail_seq;   /* the least seq of a failed entry */
	size_t conflicts;    /* failed as conflicts (in failed too) */
	char first_fail[MB_PATH_MAX], first_why[200];
};

void mbfs_wbq_note_failure_locked(struct mbfs_wbq *q, size_t count,
				  uint64_t seq, const char *path,
				  const char *why, bool conflict)
{
	q->failed_files += count;
	if (q->nunsaid < MBFS_WBQ_UNSAID) {
		q->unsaid[q->nunsaid].seq = seq;
		q->unsaid[q->nunsaid].conflict = conflict;
		q->unsaid[q->nunsaid++].count = count;
	} else {   /* said at the latest sync of either */
		size_t last = MBFS_WBQ_UNSAID - 1;
		if (seq < q->unsaid[last].seq)
			q->unsaid[last].seq = seq;
		q->unsaid[last].count += count;
		q->unsaid[last].conflict &= conflict;
	}
	snprintf(q->last_error, sizeof(q->last_error), "'%.80s': %.160s", path,
		 why);
}

static void failure(struct batch *b, uint64_t seq, const char *path,
		    const char *why)
{
	/* apply.sh's word for a file the sandbox changed since our copy */
	if (strncmp(why, "conflict:", 9) == 0)
		b->conflicts++;
	if (!b->failed || seq < b->fail_seq)
		b->fail_seq = seq;
	if (b->failed++)
		return;
	snprintf(b->first_fail, sizeof(b->first_fail), "%s", path);
	snprintf(b->first_why, sizeof(b->first_why), "%.190s", why);
}

static void batch_free(struct batch *b)
{
	free(b->ev);
	free(b->fv);
	free(b->fe);
	free(b->dv);
	free(b->up);
}

/* Mark the oldest entries that may go now in flight (up to the batch
 * limits); their count, and their bytes into *bytes. q->lock held. */
static size_t pick_locked(struct mbfs_wbq *q, uint64_t *bytes)
{
	size_t k = 0;
	uint64_t now = mb_now_ms();
	bool skipped = false, others = false;
	*bytes = 0;
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
		if (!e->n && mbfs_wbdir_removes(e->kind) && (skipped || others))
			break;
		/* a directory's time or mode never overtakes a file queued
		 * before it; a mkdir may (nothing queued before it is in it) */
		if (!e->n && e->kind != MBFS_WBDIR_MAKE && skipped)
			continue;
		if (k && (k >= MBFS_WBQ_BATCH_FILES ||
			  *bytes + e->bytes > MBFS_WBQ_BATCH_MAX))
			break;
		e->inflight = true;
		e->urgent = false;
		others = others || e->n || !mbfs_wbdir_removes(e->kind);
		*bytes += e->bytes;
		k++;
	}
	return k;
}

/* The k entries in flight into b (ev, dv). false without memory: none is
 * in flight any more. q->lock held. */
static bool gather_locked(struct mbfs_wbq *q, struct batch *b)
{
	size_t k = b->k;
	b->ev = malloc(k * sizeof(*b->ev));
	b->fv = calloc(k, sizeof(*b->fv));
	b->dv = calloc(k, sizeof(*b->dv));
	b->fe = malloc(k * sizeof(*b->fe));
	b->up = malloc(k * sizeof(*b->up));
	if (!b->ev || !b->fv || !b->dv || !b->fe || !b->up) {
		for (struct mbfs_wbq_entry *e = q->head; e; e = e->next)
			e->inflight = false;
		return false;
	}
	size_t i = 0;
	for (struct mbfs_wbq_entry *e = q->head; e && i < k; e = e->next) {
		if (!e->inflight)
			continue;
		b->ev[i++] = e;
		if (e->n)
			continue;
		/* the entry keeps the path while in flight */
		struct mbfs_wbdir *d = &b->dv[b->nd++];
		d->path = e->dpath;
		d->to = e->dto;
		memcpy(d->mv_id, e->mv_id, sizeof(d->mv_id));
		d->kind = e->kind;
		d->mode = e->dmode;
		d->doubt = e->doubt;
		d->mtime = e->dtime;
		d->base_known = e->base_known;
		d->base_size = e->base_size;
		d->base_mtime = e->base_mtime;
	}
	q->queued -= k;
	q->queued_bytes -= b->bytes;
	q->inflight += k;
	q->inflight_bytes += b->bytes;
	return true;
}

/* Each node's data, read now; one that cannot travel in a batch (grown
 * too large, a name tar cannot hold) is uploaded after it, once the
 * directories it makes are there. */
static void take_files(struct mbfs *fs, struct mbfs_wbq *q, struct batch *b)
{
	for (size_t i = 0; i < b->k; i++) {
		if (!b->ev[i]->n)
			continue;
		int r = q->files->take(fs, b->ev[i]->n, &b->fv[b->nf]);
		if (r > 0)
			b->fe[b->nf++] = i;
		else if (r < 0)
			b->up[b->nup++] = i;
	}
}

/* Could the batch not reach the sandbox for a reason that passes (the
 * service unreachable or failing, no room here for the journal)? Then it
 * goes again later; a refusal or a sandbox gone for good does not. */
static bool may_retry(int rc, const struct mb_err *err)
{
	return rc && (mb_err_is_transient(err) || err->errnum == ENOSPC ||
		      err->errnum == EDQUOT || rc == -ENOSPC);
}

/* The batch b in flight could not reach the sandbox: each entry goes
 * back in the queue where it was, nothing is kept or counted as failed,
 * and the next try waits (1, 2, 4 ... 30 s; a waiter's fsync or sync
 * tries at once). Lock not held; held on return. */
static void retry_later(struct mbfs_wbq *q, struct batch *b,
			const struct mb_err *err)
{
	for (size_t i = 0; i < b->nf; i++) {
		free(b->fv[i].path);
		free(b->fv[i].data);
	}
	pthread_mutex_lock(&q->lock);
	uint64_t now = mb_now_ms();
	q->sending_since = 0;
	q->inflight -= b->k;
	q->inflight_bytes -= b->bytes;
	for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (!e->inflight)
			continue;
		e->inflight = e->again = false;
		/* the batch may have run on the guest, its answer lost */
		e->doubt = e->doubt || (!e->n && e->kind == MBFS_WBDIR_MAKE);
		/* its age stays: its files are no newer for it, and so go
		 * with the next batch, first, as they went. Made young, they
		 * waited out the just-closed delay while that batch took a
		 * mkdir of this one without them, and the mkdir's doubt check
		 * (the directory holds only names its batch puts there) found
		 * them there, made by the run whose answer was lost: a false
		 * conflict kept every file written in it. */
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

/* The removals and moves went first, and so are told first: a file of
 * the batch may be at a removed name again; one the sandbox refused shows
 * again.
 * Then the directories made: what the batch put in them is told to the
 * cache after their (empty) listings. rc: the batch's as a whole. */
static void land_names(struct mbfs *fs, struct batch *b, int rc,
		       const struct mb_err *err)
{
	/* dv holds the entries of ev that are not files, in their order */
	for (size_t j = 0, i = 0; j < b->k; j++) {
		if (b->ev[j]->n)
			continue;
		struct mbfs_wbdir *d = &b->dv[i++];
		if (!mbfs_wbdir_removes(d->kind))
			continue;
		if (rc) {
			d->rc = rc;
			snprintf(d->why, sizeof(d->why), "%.150s", err->msg);
		}
		if (d->kind == MBFS_WBDIR_MV)
			mbfs_wbq_moved(fs, b->ev[j], d);
		else
			mbfs_wbq_dir_landed(fs, d);
		/* done or refused there: the view shows what the sandbox has
		 * (a mkdir of the batch may show the name again at once) */
		if (d->kind != MBFS_WBDIR_CHMOD)
			mbfs_gone_remove(fs->gone, d->path);
		b->ev[j]->landed = true;
		if (d->rc)
			failure(b, b->ev[j]->seq, d->path, d->why);
	}
	for (size_t j = 0, i = 0; j < b->k; j++) {
		if (b->ev[j]->n)
			continue;
		struct mbfs_wbdir *d = &b->dv[i++];
		if (d->kind != MBFS_WBDIR_MAKE)
			continue;
		int drc = rc ? rc : d->rc;
		const char *why = rc ? err->msg : d->why;
		mbfs_wbq_made(fs, d->path, drc, why);
		if (drc)
			failure(b, b->ev[j]->seq, d->path, why);
	}
}

/* The files' outcomes to their nodes; then the directories' times and
 * modes, set after the files' renames moved them. */
static void land_files(struct mbfs *fs, struct mbfs_wbq *q, struct batch *b, int rc,
		       const struct mb_err *err)
{
	for (size_t i = 0; i < b->nf; i++) {
		struct mbfs_wbfile *f = &b->fv[i];
		int frc = rc ? rc : f->rc;
		const char *why = rc ? err->msg : f->why;
		q->files->done(fs, b->ev[b->fe[i]]->n, f, frc, why);
		if (frc) {
			b->bfailed++;
			failure(b, b->ev[b->fe[i]]->seq, f->path, why);
		} else {
			b->sent += f->len;
		}
		free(f->path);
		free(f->data);
	}
	for (size_t i = 0; i < b->nd && !rc; i++)
		if (!mbfs_wbdir_removes(b->dv[i].kind))
			mbfs_wbq_dir_landed(fs, &b->dv[i]);
}

/* The files that could not travel in the batch, each uploaded on its own
 * now (counted by its upload meanwhile, wbq_up.c, not twice). */
static void upload_rest(struct mbfs *fs, struct mbfs_wbq *q, struct batch *b)
{
	for (size_t i = 0; i < b->nup; i++)
		b->upbytes += b->ev[b->up[i]]->bytes;
	if (b->nup) {
		pthread_mutex_lock(&q->lock);
		q->inflight -= b->nup;
		q->inflight_bytes -= b->upbytes;
		pthread_mutex_unlock(&q->lock);
	}
	for (size_t i = 0; i < b->nup; i++) {
		struct mbfs_node *n = b->ev[b->up[i]]->n;
		int urc = q->files->upload(fs, n);
		char path[MB_PATH_MAX] = "";
		if (urc) {
			q->files->path(fs, n, path);
			failure(b, b->ev[b->up[i]]->seq, path, strerror(-urc));
		}
	}
}

/* The batch is settled: its totals, and its entries leave the queue (a
 * file changed and closed again meanwhile stays for a later batch, with
 * the same reference). The nodes whose reference the queue held go to
 * *drop (k of room). q->lock held. */
static size_t finish_locked(struct mbfs *fs, struct mbfs_wbq *q,
			    struct batch *b, int rc, struct mbfs_node **drop)
{
	size_t ndrop = 0;
	bool sent = b->nf || b->nd;
	q->sending_since = 0;
	q->inflight -= b->k - b->nup;
	q->inflight_bytes -= b->bytes - b->upbytes;
	if (sent)
		q->sent_batches++;
	if (sent && !rc && q->retry_streak) {
		mb_log(MB_LOG_INFO, "write-back: the sandbox answers again");
		q->retry_streak = 0;
		q->retry_at = 0;
	}
	q->sent_files += b->nf - b->bfailed;
	q->sent_bytes += b->sent;
	if (b->failed)
		mbfs_wbq_note_failure_locked(q, b->failed, b->fail_seq,
					     b->first_fail, b->first_why,
					     b->conflicts == b->failed);
	/* one batch in flight at a time: what is in flight is this one's */
	struct mbfs_wbq_entry **pp = &q->head;
	while (*pp) {
		struct mbfs_wbq_entry *e = *pp;
		if (!e->inflight) {
			pp = &e->next;
			continue;
		}
		if (e->n && (e->again || !drop)) {
			/* landed, and closed again since it left: what a
			 * flush that began before that close waits for is
			 * there (a program that keeps rewriting the file
			 * would hold mbexec's sync for as long) */
			if (e->again)
				e->seq = e->again_seq;
			e->inflight = e->again = false;
			e->since_ms = mb_now_ms();
			q->queued++;
			q->queued_bytes += e->bytes;
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (e->n) {
			q->files->set_entry(e->n, NULL);
			q->nfiles--;
			drop[ndrop++] = e->n;
			free(e);
		} else {
			mbfs_wbq_drop_dir_locked(fs, q, e);
		}
	}
	q->tail = pp;
	pthread_cond_broadcast(&q->cond);
	return ndrop;
}

void mbfs_wbq_send_locked(struct mbfs *fs, struct mbfs_wbq *q)
{
	struct batch b;
	memset(&b, 0, sizeof(b));
	b.k = pick_locked(q, &b.bytes);
	if (!b.k)
		return;
	if (!gather_locked(q, &b)) {
		batch_free(&b);
		return;   /* the flusher tries again after its delay */
	}
	q->sending_since = mb_now_ms();
	pthread_mutex_unlock(&q->lock);

	take_files(fs, q, &b);
	struct mb_err err;
	mb_err_clear(&err);
	int rc = 0;
	if (b.nf || b.nd) {
		/* what the journal says of the batch is on disk before it
		 * goes: a mkdir, a rename or a time no close came after is
		 * lost to a power cut only while it waits for its batch */
		mbfs_journal_commit(fs->journal, -1);
		/* times queued for these files or their directories land
		 * first: the batch moves both mtimes */
		for (size_t i = 0; i < b.nf; i++)
			mbfs_batch_flush(fs, b.fv[i].path,
					 MBFS_BATCH_SELF | MBFS_BATCH_PARENT);
		rc = mbfs_wbsend(fs, b.fv, b.nf, b.dv, b.nd, &err);
	}
	if (may_retry(rc, &err)) {
		retry_later(q, &b, &err);
		batch_free(&b);
		return;
	}
	land_names(fs, &b, rc, &err);
	land_files(fs, q, &b, rc, &err);
	upload_rest(fs, q, &b);

	struct mbfs_node **drop = malloc(b.k * sizeof(*drop));
	pthread_mutex_lock(&q->lock);
	size_t ndrop = finish_locked(fs, q, &b, rc, drop);
	pthread_mutex_unlock(&q->lock);
	batch_free(&b);
	/* the queue's references; the last one of a node lets it go */
	for (size_t i = 0; i < ndrop; i++)
		q->files->release(fs, drop[i]);
	free(drop);
	pthread_mutex_lock(&q->lock);
}
