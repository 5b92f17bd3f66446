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

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/mbfs.h"
#include "fuse/node.h"
#include "fuse/remote.h"

#define EXEC_TIMEOUT_MS 50000L
#define FAIL_MARK "!mbfs-touch-failed "
#define LOG_PATHS 20

struct item {
	struct item *next;
	char *path;
	struct timespec a, m;    /* tv_nsec UTIME_OMIT: leave alone */
	uint64_t since_ms;       /* queued at */
	bool inflight;
	int rc;                  /* outcome of the send */
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
	free(it->path);
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

/* a at or below b */
static bool at_or_below(const char *a, const char *b)
{
	if (strcmp(b, "/") == 0)
		return true;
	size_t n = strlen(b);
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* a is the directory holding b */
static bool is_parent(const char *a, const char *b)
{
	const char *slash = strrchr(b, '/');
	if (!slash || strcmp(b, "/") == 0)
		return false;
	size_t n = (size_t)(slash - b);
	if (n == 0)
		return strcmp(a, "/") == 0;
	return strncmp(a, b, n) == 0 && a[n] == '\0';
}

static bool selects(const char *item, const char *path, unsigned which)
{
	bool self = strcmp(item, path) == 0;
	return ((which & MBFS_BATCH_SELF) && self) ||
	       ((which & MBFS_BATCH_BELOW) && !self && at_or_below(item, path)) ||
	       ((which & MBFS_BATCH_PARENT) && is_parent(item, path)) ||
	       ((which & MBFS_BATCH_CHILDREN) && is_parent(path, item));
}

static bool moving(const struct mbfs_batch *b, const char *path)
{
	for (size_t i = 0; i < b->nmoves; i++)
		if (at_or_below(path, b->moves[i]))
			return true;
	return false;
}

/* ---- sending ---- */

static int append_touch(struct mb_buf *b, const char *flag,
			const struct timespec *ts, const char *qpath)
{
	long long sec = ts->tv_sec;
	long nsec = ts->tv_nsec;
	const char *sign = "";
	if (sec < 0 && nsec > 0) {     /* {-2, .5 s} is -1.5 s */
		sec = -(sec + 1);
		nsec = 1000000000L - nsec;
		sign = "-";
	} else if (sec < 0) {
		sec = -sec;
		sign = "-";
	}
	return mb_buf_appendf(b, "touch -c -h %s-d @%s%lld.%09ld -- %s", flag,
			      sign, sec, nsec, qpath);
}

/* Items with the same times share one touch: qsort order. */
static int item_cmp(const void *x, const void *y)
{
	const struct item *p = *(struct item *const *)x;
	const struct item *q = *(struct item *const *)y;
	const long long k[2][4] = {
		{ p->a.tv_sec, p->a.tv_nsec, p->m.tv_sec, p->m.tv_nsec },
		{ q->a.tv_sec, q->a.tv_nsec, q->m.tv_sec, q->m.tv_nsec },
	};
	for (int i = 0; i < 4; i++)
		if (k[0][i] != k[1][i])
			return k[0][i] < k[1][i] ? -1 : 1;
	return 0;
}

/* The touch command(s) setting key's times on paths (quoted, separated by
 * spaces), and the marker listing the items (" 3 4 5") when they fail. */
static int compose(struct mb_buf *out, const struct item *key,
		   const char *paths, const char *marks)
{
	bool aset = key->a.tv_nsec != UTIME_OMIT;
	bool mset = key->m.tv_nsec != UTIME_OMIT;
	int rc;
	if (aset && mset && key->a.tv_sec == key->m.tv_sec &&
	    key->a.tv_nsec == key->m.tv_nsec) {
		rc = append_touch(out, "", &key->m, paths);
	} else {
		rc = mb_buf_appends(out, "{ ");
		if (!rc && aset)
			rc = append_touch(out, "-a ", &key->a, paths);
		if (!rc && aset && mset)
			rc = mb_buf_appends(out, " && ");
		if (!rc && mset)
			rc = append_touch(out, "-m ", &key->m, paths);
		if (!rc)
			rc = mb_buf_appends(out, "; }");
	}
	if (!rc)
		rc = mb_buf_appendf(out, " || echo '" FAIL_MARK "%s'\n", marks);
	return rc;
}

/* How many times compose() writes the paths. */
static size_t copies(const struct item *key)
{
	bool both = key->a.tv_nsec != UTIME_OMIT && key->m.tv_nsec != UTIME_OMIT;
	return both && (key->a.tv_sec != key->m.tv_sec ||
			key->a.tv_nsec != key->m.tv_nsec) ? 2 : 1;
}

/* Run one script covering v[first..end) (items already failed are not in
 * it); record each item's outcome. */
static void run_script(struct mbfs *fs, const char *script, struct item **v,
		       size_t first, size_t end, char *why, size_t whysz)
{
	struct mb_exec_result res;
	struct mb_err err;
	int rc = mbfs_exec(fs, script, EXEC_TIMEOUT_MS, &res, &err);
	if (rc) {
		rc = mbfs_fail(fs, rc, &err);
		snprintf(why, whysz, "%.200s", err.msg[0] ? err.msg : strerror(-rc));
	} else if (!mbfs_exec_ok(&res)) {
		rc = res.timed_out ? -ETIMEDOUT : mbfs_stderr_errno(res.errout);
		snprintf(why, whysz, "%.200s", res.errout && res.errout[0]
			 ? res.errout : strerror(-rc));
	}
	for (size_t i = first; i < end; i++)
		if (!v[i]->rc)
			v[i]->rc = rc;
	for (const char *s = res.out; !rc && s && (s = strstr(s, FAIL_MARK));) {
		s += strlen(FAIL_MARK);
		for (;;) {
			char *e;
			unsigned long long k = strtoull(s, &e, 10);
			if (e == s)
				break;
			if (k >= first && k < end)
				v[k]->rc = mbfs_stderr_errno(res.errout);
			s = e;
		}
	}
	if (!rc && res.errout && res.errout[0])
		snprintf(why, whysz, "%.200s", res.errout);
	mb_exec_result_release(&res);   /* zeroed when the request failed */
}

/* Send the n items of v (in flight, owned by this send; reordered here)
 * in scripts below the command limit, one touch per run of equal times.
 * Outcomes in v[i]->rc; why: a message for the log. */
static void send_items(struct mbfs *fs, struct item **v, size_t n,
		       char *why, size_t whysz)
{
	const size_t max = MB_MAX_COMMAND_BYTES;
	struct mb_buf script, line, paths, marks, q;
	mb_buf_init(&script, max);
	mb_buf_init(&line, max);
	mb_buf_init(&paths, max);
	mb_buf_init(&marks, max);
	mb_buf_init(&q, max);
	qsort(v, n, sizeof(*v), item_cmp);
	const struct item *key = NULL;   /* times of the open line */
	size_t first = 0, lfirst = 0, fixed = 0;
	for (size_t i = 0; i <= n; i++) {
		char rpath[MB_PATH_MAX];
		int rc = 0;
		mb_buf_reset(&q);
		if (i < n && !(rc = mbfs_remote_path(fs, v[i]->path, rpath)))
			rc = mb_buf_append_shq(&q, rpath);
		size_t need = key ? fixed + copies(key) * (paths.len + 1 + q.len) +
				    marks.len + 24 : 0;
		if (key && (i == n || rc || item_cmp(&key, &v[i]) || need > max)) {
			size_t len = fixed + copies(key) * paths.len + marks.len;
			mb_buf_reset(&line);
			if (script.len && script.len + len > max) {
				run_script(fs, script.data, v, first, lfirst,
					   why, whysz);
				mb_buf_reset(&script);
				first = lfirst;
			}
			if (compose(&line, key, paths.data, marks.data) ||
			    mb_buf_append(&script, line.data, line.len)) {
				for (size_t k = lfirst; k < i; k++)
					v[k]->rc = v[k]->rc ? v[k]->rc : -ENOMEM;
				snprintf(why, whysz, "out of memory");
			}
			key = NULL;
			mb_buf_reset(&paths);
			mb_buf_reset(&marks);
		}
		if (i == n)
			break;
		if (!key && !rc) {
			key = v[i];
			lfirst = i;
			mb_buf_reset(&line);
			rc = compose(&line, key, "", "");
			fixed = line.len;
			if (!rc && fixed + copies(key) * q.len + 24 > max)
				rc = -ENAMETOOLONG;
			if (rc)
				key = NULL;
		}
		if (!rc && paths.len)
			rc = mb_buf_appends(&paths, " ");
		if (!rc)
			rc = mb_buf_append(&paths, q.data, q.len);
		if (!rc)
			rc = mb_buf_appendf(&marks, " %zu", i);
		if (rc) {
			v[i]->rc = rc == -ENOMEM ? rc : -ENAMETOOLONG;
			snprintf(why, whysz, "%s", strerror(-v[i]->rc));
			if (key && !paths.len)
				key = NULL;
		}
	}
	if (script.len)
		run_script(fs, script.data, v, first, n, why, whysz);
	mb_buf_release(&q);
	mb_buf_release(&marks);
	mb_buf_release(&paths);
	mb_buf_release(&line);
	mb_buf_release(&script);
}

static void set_mtime(struct stat *st, const void *arg)
{
	st->st_mtim.tv_sec = *(const time_t *)arg;
	st->st_mtim.tv_nsec = 0;
	st->st_ctim = st->st_mtim;
}

/* The outcomes of a send into the cache, and one log line for failures. */
static void settle(struct mbfs *fs, struct item **v, size_t n, const char *why)
{
	size_t failed = 0;
	char list[LOG_PATHS * 64 + 64] = "";
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		struct item *it = v[i];
		if (it->rc == 0) {
			if (it->m.tv_nsec != UTIME_OMIT)
				mbfs_cache_modify(fs->cache, it->path, set_mtime,
						  &it->m.tv_sec);
			continue;
		}
		mbfs_cache_invalidate(fs->cache, it->path);
		if (failed++ < LOG_PATHS && used < sizeof(list)) {
			char rpath[MB_PATH_MAX];
			if (mbfs_remote_path(fs, it->path, rpath))
				snprintf(rpath, sizeof(rpath), "%s", it->path);
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
		if (!it->inflight && !moving(b, it->path))
			n++;
	*took = n;
	if (!n)
		return 0;
	struct item **v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	n = 0;
	for (struct item *it = b->head; it; it = it->next) {
		if (!it->inflight && !moving(b, it->path)) {
			it->inflight = true;
			it->rc = 0;
			v[n++] = it;
		}
	}
	b->sending = true;
	pthread_mutex_unlock(&b->lock);

	char why[256] = "";
	send_items(fs, v, n, why, sizeof(why));
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
		if (!it->inflight && !moving(b, it->path) &&
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
			send_locked(fs, b, &took);
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
		if (!(*tail)->inflight && strcmp((*tail)->path, path) == 0)
			it = *tail;
	if (!it) {
		it = calloc(1, sizeof(*it));
		if (!it || !(it->path = strdup(path))) {
			free(it);
			pthread_mutex_unlock(&b->lock);
			return -ENOMEM;
		}
		it->a.tv_nsec = it->m.tv_nsec = UTIME_OMIT;
		it->since_ms = mb_now_ms();
		*tail = it;
	}
	if (a.tv_nsec != UTIME_OMIT)
		it->a = a;
	if (m.tv_nsec != UTIME_OMIT)
		it->m = m;
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
		if (it->m.tv_nsec != UTIME_OMIT && strcmp(it->path, path) == 0) {
			st->st_mtim.tv_sec = it->m.tv_sec;
			st->st_mtim.tv_nsec = 0;
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
			if (!selects(it->path, path, which))
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
			busy = it->inflight && at_or_below(it->path, from);
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
		if (it->inflight || !at_or_below(it->path, from))
			continue;
		char *np;
		if (asprintf(&np, "%s%s", to, it->path + fl) < 0)
			continue;   /* keeps the old name: a `touch -c` no-op */
		free(it->path);
		it->path = np;
	}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}
