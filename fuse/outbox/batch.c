/* batch.c: queued utimens, sent in batches (see batch.h).
 *
 * The queue is a list in arrival order. An item is queued (merged with a
 * later utimens of the same path) until a send takes it; it stays in the
 * list, in flight, until its outcome is in the cache, so getattr never
 * sees the old times in between. One send runs at a time (b->sending), so
 * the times of one path reach the guest in the order they were set.
 * Not thread-local: any thread may end up sending (flusher, an op that
 * needs the times first, the control file).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/sink.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/touch.h"

#define LOG_PATHS 20

struct item {
	struct item *next;
	struct mbfs_touch t;     /* path (owned) and times; tv_nsec UTIME_OMIT:
	                            leave alone */
	uint64_t since_ms;       /* queued at */
	bool inflight;
};

struct mbfs_batch {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* any change: queued, sent, moved, stop */
	struct item *head;       /* protected by lock, oldest first */
	bool sending;            /* a send is running; protected by lock */
	char **moves;            /* sources of renames running; by lock */
	size_t nmoves;
	bool failed;             /* a send failed since the last sync */
	bool stop;
	bool running;            /* the flusher thread exists */
	pthread_t thread;
};

struct mbfs_batch *mbfs_batch_new(void)
{
	struct mbfs_batch *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&b->lock, NULL);
	return b;
}

static void item_free(struct item *it)
{
	free(it->t.path);
	free(it);
}

void mbfs_batch_free(struct mbfs_batch *b)
{
	if (!b)
		return;
	while (b->head) {
		struct item *n = b->head->next;
		item_free(b->head);
		b->head = n;
	}
	free(b->moves);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* Is path, or a directory above it, being renamed? */
static bool moving(const struct mbfs_batch *b, const char *path)
{
	for (size_t i = 0; i < b->nmoves; i++)
		if (mbfs_path_at_or_below(path, b->moves[i]))
			return true;
	return false;
}

/* ---- sending ---- */

/* The outcomes of a send into the cache, and one log line for failures. */
static void settle(struct mbfs *fs, struct mbfs_touch **v, size_t n,
		   const char *why)
{
	size_t failed = 0;
	char list[LOG_PATHS * 64 + 64] = "";
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		struct mbfs_touch *t = v[i];
		if (t->rc == 0) {
			if (t->m.tv_nsec != UTIME_OMIT)
				fs->sink->set_mtime(fs, t->path, &t->m);
			continue;
		}
		fs->sink->unsure(fs, t->path, false);
		if (failed++ < LOG_PATHS && used < sizeof(list)) {
			char rpath[MB_PATH_MAX];
			if (mbfs_remote_path(fs, t->path, rpath))
				snprintf(rpath, sizeof(rpath), "%s", t->path);
			int w = snprintf(list + used, sizeof(list) - used, "%s'%.60s'",
					 used ? ", " : "", rpath);
			used += w > 0 ? (size_t)w : 0;
		}
	}
	if (failed)
		mb_log(MB_LOG_ERR, "cannot set the times of %zu file%s on the guest "
		       "(%s%s): %s", failed, failed == 1 ? "" : "s", list,
		       failed > LOG_PATHS ? ", ..." : "", why[0] ? why : "failed");
}

/* Take every queued item not held by a rename and send it. Lock held and
 * no send running; the lock is dropped meanwhile. *took: items sent.
 * 0 or the first failure. */
static int send_locked(struct mbfs *fs, struct mbfs_batch *b, size_t *took)
{
	size_t n = 0;
	for (struct item *it = b->head; it; it = it->next)
		if (!it->inflight && !moving(b, it->t.path))
			n++;
	*took = 0;
	if (!n)
		return 0;
	/* pointers into the items: they stay in the list, in flight, and only
	 * this send removes them */
	struct mbfs_touch **v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*took = n;
	n = 0;
	for (struct item *it = b->head; it; it = it->next) {
		if (!it->inflight && !moving(b, it->t.path)) {
			it->inflight = true;
			it->t.rc = 0;
			v[n++] = &it->t;
		}
	}
	b->sending = true;
	pthread_mutex_unlock(&b->lock);

	char why[256] = "";
	mbfs_touch_send(fs, v, n, why, sizeof(why));
	settle(fs, v, n, why);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = v[i]->rc;

	pthread_mutex_lock(&b->lock);
	for (struct item **pp = &b->head; *pp;) {
		struct item *it = *pp;
		if (it->inflight) {
			*pp = it->next;
			item_free(it);
		} else {
			pp = &it->next;
		}
	}
	free(v);
	b->sending = false;
	if (rc)
		b->failed = true;
	pthread_cond_broadcast(&b->cond);
	return rc;
}

/* ---- the flusher ---- */

/* When the oldest item that may be sent is due (ms), or 0 when none. */
static uint64_t due_ms(const struct mbfs_batch *b)
{
	uint64_t due = 0;
	for (const struct item *it = b->head; it; it = it->next)
		if (!it->inflight && !moving(b, it->t.path) &&
		    (!due || it->since_ms + MBFS_BATCH_DELAY_MS < due))
			due = it->since_ms + MBFS_BATCH_DELAY_MS;
	return due;
}

static void *flusher(void *arg)
{
	struct mbfs *fs = arg;
	struct mbfs_batch *b = fs->batch;
	pthread_mutex_lock(&b->lock);
	while (!b->stop) {
		uint64_t due = due_ms(b), now = mb_now_ms();
		if (!due || b->sending) {
			pthread_cond_wait(&b->cond, &b->lock);
		} else if (now < due) {
			struct timespec ts = {
				.tv_sec = (time_t)(due / 1000),
				.tv_nsec = (long)(due % 1000) * 1000000L,
			};
			pthread_cond_timedwait(&b->cond, &b->lock, &ts);
		} else {
			size_t took;
			if (send_locked(fs, b, &took) == -ENOMEM && !took) {
				/* try again a little later */
				uint64_t t = mb_now_ms() + MBFS_BATCH_DELAY_MS;
				struct timespec ts = {
					.tv_sec = (time_t)(t / 1000),
					.tv_nsec = (long)(t % 1000) * 1000000L,
				};
				pthread_cond_timedwait(&b->cond, &b->lock, &ts);
			}
		}
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

int mbfs_batch_start(struct mbfs *fs)
{
	struct mbfs_batch *b = fs->batch;
	int rc = pthread_create(&b->thread, NULL, flusher, fs);
	if (rc)
		return -rc;
	pthread_mutex_lock(&b->lock);
	b->running = true;
	pthread_mutex_unlock(&b->lock);
	return 0;
}

void mbfs_batch_stop(struct mbfs *fs)
{
	struct mbfs_batch *b = fs->batch;
	if (mbfs_batch_sync(fs))
		mb_log(MB_LOG_WARN, "some file times were not set on the guest");
	pthread_mutex_lock(&b->lock);
	bool running = b->running;
	b->stop = true;
	b->running = false;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	if (running)
		pthread_join(b->thread, NULL);
}

/* ---- the interface ---- */

static void resolve(struct timespec *t, const struct timespec *now)
{
	if (t->tv_nsec == UTIME_NOW)
		*t = *now;
}

int mbfs_batch_utimens(struct mbfs *fs, const char *path,
		       const struct timespec tv[2])
{
	struct mbfs_batch *b = fs->batch;
	struct timespec now, a, m;
	clock_gettime(CLOCK_REALTIME, &now);
	a = tv ? tv[0] : now;
	m = tv ? tv[1] : now;
	resolve(&a, &now);
	resolve(&m, &now);
	if (a.tv_nsec == UTIME_OMIT && m.tv_nsec == UTIME_OMIT)
		return 0;
	pthread_mutex_lock(&b->lock);
	struct item *it = NULL, **tail = &b->head;
	for (; *tail; tail = &(*tail)->next)
		if (!(*tail)->inflight && strcmp((*tail)->t.path, path) == 0)
			it = *tail;
	if (!it) {
		it = calloc(1, sizeof(*it));
		if (!it || !(it->t.path = strdup(path))) {
			free(it);
			pthread_mutex_unlock(&b->lock);
			return -ENOMEM;
		}
		it->t.a.tv_nsec = it->t.m.tv_nsec = UTIME_OMIT;
		it->since_ms = mb_now_ms();
		*tail = it;
	}
	if (a.tv_nsec != UTIME_OMIT)
		it->t.a = a;
	if (m.tv_nsec != UTIME_OMIT)
		it->t.m = m;
	bool running = b->running;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	if (!running)
		return mbfs_batch_flush(fs, path, MBFS_BATCH_SELF);
	return 0;
}

void mbfs_batch_apply(struct mbfs *fs, const char *path, struct stat *st)
{
	struct mbfs_batch *b = fs->batch;
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	for (const struct item *it = b->head; it; it = it->next) {
		if (it->t.m.tv_nsec != UTIME_OMIT && strcmp(it->t.path, path) == 0) {
			st->st_mtim = it->t.m;
			st->st_ctim = st->st_mtim;
		}
	}
	pthread_mutex_unlock(&b->lock);
}

int mbfs_batch_flush(struct mbfs *fs, const char *path, unsigned which)
{
	struct mbfs_batch *b = fs->batch;
	int rc = 0;
	pthread_mutex_lock(&b->lock);
	for (;;) {
		bool queued = false, inflight = false;
		for (const struct item *it = b->head; it; it = it->next) {
			if (!mbfs_path_selects(it->t.path, path, which))
				continue;
			if (it->inflight)
				inflight = true;
			else
				queued = true;
		}
		if (!queued && !inflight)
			break;
		size_t took = 0;
		if (!b->sending) {
			int r = send_locked(fs, b, &took);
			if (r && !rc)
				rc = r;
			if (r == -ENOMEM && !took)
				break;
		}
		if (!took)   /* in flight elsewhere, or held by a rename */
			pthread_cond_wait(&b->cond, &b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

int mbfs_batch_sync(struct mbfs *fs)
{
	struct mbfs_batch *b = fs->batch;
	int rc = mbfs_batch_flush(fs, "/", MBFS_BATCH_SELF | MBFS_BATCH_BELOW);
	pthread_mutex_lock(&b->lock);
	if (b->failed)
		rc = -EIO;
	b->failed = false;
	pthread_mutex_unlock(&b->lock);
	return rc ? -EIO : 0;
}

void mbfs_batch_move_begin(struct mbfs *fs, const char *from)
{
	struct mbfs_batch *b = fs->batch;
	char *copy = strdup(from);
	pthread_mutex_lock(&b->lock);
	for (;;) {
		bool busy = false;
		for (const struct item *it = b->head; it && !busy; it = it->next)
			busy = it->inflight && mbfs_path_at_or_below(it->t.path, from);
		if (!busy)
			break;
		pthread_cond_wait(&b->cond, &b->lock);
	}
	char **nm = copy ? realloc(b->moves, (b->nmoves + 1) * sizeof(*nm)) : NULL;
	if (nm) {
		b->moves = nm;
		b->moves[b->nmoves++] = copy;
		copy = NULL;
	}
	pthread_mutex_unlock(&b->lock);
	if (copy) {
		/* cannot hold the items back: send them before the rename */
		free(copy);
		mbfs_batch_flush(fs, from, MBFS_BATCH_SELF | MBFS_BATCH_BELOW);
	}
}

void mbfs_batch_move_end(struct mbfs *fs, const char *from, const char *to,
			 bool done)
{
	struct mbfs_batch *b = fs->batch;
	size_t fl = strlen(from);
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->nmoves; i++) {
		if (strcmp(b->moves[i], from) == 0) {
			free(b->moves[i]);
			b->moves[i] = b->moves[--b->nmoves];
			break;
		}
	}
	for (struct item *it = b->head; done && it; it = it->next) {
		if (it->inflight || !mbfs_path_at_or_below(it->t.path, from))
			continue;
		char *np;
		if (asprintf(&np, "%s%s", to, it->t.path + fl) < 0)
			continue;   /* keeps the old name: a `touch -c` no-op */
		free(it->t.path);
		it->t.path = np;
	}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}
