/* wbq.c: the write-back queue and its flusher thread (see wbq.h); one
 * batch's sending is wbq_send.c.
 *
 * The queue is a list in arrival order; an entry holds a reference to its
 * node and stays in the list, in flight, while its batch is sent, so
 * waiters can tell it from a file that is done. Nodes are read, taken and
 * settled through the table the node layer gives (wbq.h: mbfs_wbq_files;
 * a node's path under nodes_lock), which owns what a batch does to a
 * node; the entries
 * of directories are made and shown by wbq_dir.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/pathsel.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_int.h"
#include "fuse/outbox/wbsend.h"

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

void mbfs_wbq_set_files(struct mbfs_wbq *q, const struct mbfs_wbq_files *files)
{
	q->files = files;
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
			q->files->set_entry(q->head->n, NULL);
		free(q->head->dpath);
		free(q->head);
		q->head = e;
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
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
	uint64_t due = 0, first = 0, newest = 0;
	for (const struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (e->inflight)
			continue;
		if (e->urgent)
			return 1;
		if (!first)
			first = e->since_ms;
		if (e->since_ms > newest)
			newest = e->since_ms;
	}
	due = first ? first + MBFS_WBQ_DELAY_MS : 0;
	/* closes still coming: the batch waits for a pause (wbq.h). With
	 * durable closes a storm's closes come slower, and batches that
	 * left at the pace of its closes were small and many */
	if (due && q->queued < MBFS_WBQ_STORM_FILES &&
	    newest + MBFS_WBQ_QUIET_MS > due) {
		uint64_t pause = newest + MBFS_WBQ_QUIET_MS;
		uint64_t cap = first + MBFS_WBQ_STORM_MS;
		due = pause < cap ? pause : cap;
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
			mbfs_wbq_send_locked(fs, q);
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
	if (!e->seq)
		e->seq = ++q->next_seq;
	e->next = NULL;
	*q->tail = e;
	q->tail = &e->next;
	if (e->n) {
		q->files->set_entry(e->n, e);
		q->nfiles++;
	}
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
	q->files->ref(fs, n);
	bool queued = false, extra = true;
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	struct mbfs_wbq_entry *e = q->stop || !q->running ? NULL : q->files->entry(n);
	if (q->stop || !q->running) {
		/* refused: the caller uploads */
	} else if (e && e->inflight) {
		if (!e->again)
			e->again_seq = ++q->next_seq;
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
		q->files->release(fs, n);
	return queued;
}

bool mbfs_wbq_busy(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	pthread_mutex_lock(&q->lock);
	struct mbfs_wbq_entry *e = q->files->entry(n);
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
	bool held = q->files->entry(n) != NULL;
	pthread_mutex_unlock(&q->lock);
	return held;
}

bool mbfs_wbq_queued(struct mbfs *fs, const struct mbfs_node *n)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return false;
	pthread_mutex_lock(&q->lock);
	struct mbfs_wbq_entry *e = q->files->entry(n);
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
	for (struct mbfs_wbq_entry *e; (e = q->files->entry(n)) && e->inflight;)
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
	for (struct mbfs_wbq_entry *e; (e = q->files->entry(n)) && q->running &&
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
static bool selects(const struct mbfs_wbq *q, const struct mbfs_wbq_entry *e,
		    const char *path, unsigned which)
{
	if (which & MBFS_WBQ_REMOVALS)
		return !e->n && mbfs_wbdir_removes(e->kind) &&
		       (mbfs_path_at_or_below(path, e->dpath) ||
			mbfs_path_at_or_below(e->dpath, path) ||
			(e->dto && (mbfs_path_at_or_below(path, e->dto) ||
				    mbfs_path_at_or_below(e->dto, path))));
	if (e->n)
		return mbfs_path_selects(q->files->where(e->n), path, which);
	switch (e->kind) {
	case MBFS_WBDIR_MAKE:   /* anything at or below it needs it */
		return mbfs_path_selects(path, e->dpath,
					  MBFS_BATCH_SELF | MBFS_BATCH_BELOW) ||
		       mbfs_path_selects(e->dpath, path, which);
	case MBFS_WBDIR_MV:   /* either name, as a removal's */
		if (mbfs_path_at_or_below(path, e->dto) ||
		    mbfs_path_at_or_below(e->dto, path))
			return true;
		/* fall through */
	case MBFS_WBDIR_CHMOD:   /* as a removal's: the file's other changes */
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
	uint64_t failed0, retries0, upto;
	pthread_mutex_lock(&q->lock);
	failed0 = q->failed_files;
	retries0 = q->retries;
	/* what is queued from now on is not waited for: a program that
	 * keeps writing would hold the wait (mbexec's sync) for as long */
	upto = q->next_seq;
	pthread_mutex_unlock(&q->lock);
	for (;;) {
		bool any = false;
		pthread_mutex_lock(&fs->nodes_lock);
		pthread_mutex_lock(&q->lock);
		for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
			if (e->seq > upto)
				continue;
			if (!path || selects(q, e, path, which)) {
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
			q->flushing++;
			pthread_cond_wait(&q->cond, &q->lock);
			q->flushing--;
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
			  const char *why, bool conflict)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	/* of no entry: the next sync to end says it */
	mbfs_wbq_note_failure_locked(q, count, 0, path, why, conflict);
	pthread_mutex_unlock(&q->lock);
}

/* Files the queue may hold before a create waits: each holds its working
 * copy open. A quarter of the fd limit goes to clean copies in memory
 * (data.c), some to sockets, the journal and the files programs hold
 * open; the queue takes half of the rest. */
static size_t files_bound(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (rlim_t)1 << 30)
		return SIZE_MAX;
	rlim_t left = rl.rlim_cur - rl.rlim_cur / 4;
	return left > 256 ? (size_t)(left - 128) / 2 : 64;
}

void mbfs_wbq_room(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	size_t bound = files_bound();
	if (!q || bound == SIZE_MAX)
		return;
	/* an outage stops nothing: its creates fail as they would */
	uint64_t until = mb_now_ms() + fs->op_ms;
	bool waited = false;
	pthread_mutex_lock(&q->lock);
	while (q->running && !q->stop && !q->retry_at &&
	       q->nfiles > bound) {
		uint64_t now = mb_now_ms();
		if (now >= until)
			break;
		struct timespec ts = {
			.tv_sec = (time_t)(until / 1000),
			.tv_nsec = (long)(until % 1000) * 1000000L,
		};
		waited = true;
		pthread_cond_timedwait(&q->cond, &q->lock, &ts);
	}
	pthread_mutex_unlock(&q->lock);
	if (waited)
		mb_log(MB_LOG_DEBUG, "a create waited for write-back batches: "
		       "%zu files may wait at once under the limit of open files",
		       bound);
}

int mbfs_wbq_sync(struct mbfs *fs)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->lock);
	uint64_t upto = q->next_seq;
	pthread_mutex_unlock(&q->lock);
	int frc = mbfs_wbq_flush(fs, NULL, 0);
	/* the failures of what was queued before it, not of later files */
	pthread_mutex_lock(&q->lock);
	bool failed = false, conflict = false;
	size_t k = 0;
	for (size_t i = 0; i < q->nunsaid; i++) {
		if (q->unsaid[i].seq > upto)
			q->unsaid[k++] = q->unsaid[i];
		else if (q->unsaid[i].conflict)
			conflict = true;
		else
			failed = true;
	}
	q->nunsaid = k;
	pthread_mutex_unlock(&q->lock);
	return failed || frc == -EAGAIN ? -EIO : conflict ? -EEXIST : 0;
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
	/* how long the batch in flight has gone without an answer */
	uint64_t sending_ms = q->sending_since ? mb_now_ms() - q->sending_since : 0;
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
		     ",\"inFlightMs\":%" PRIu64 ",\"syncing\":%zu"
		     ",\"lastError\":\"%s\"}",
		     q->queued + q->inflight - dirs + q->up_files, mkdirs, removes,
		     q->queued_bytes + q->inflight_bytes + q->up_bytes - up_sent,
		     q->inflight - dirs_inflight, q->up_files, q->up_bytes, up_sent,
		     q->sent_files, q->sent_batches, q->sent_bytes,
		     q->failed_files, q->retry_at ? "true" : "false",
		     q->retries, sending_ms, q->flushing, esc) < 0)
		s = NULL;
	pthread_mutex_unlock(&q->lock);
	return s;
}
