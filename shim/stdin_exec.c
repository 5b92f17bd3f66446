/* stdin_exec.c: probe and stream local stdin for the exec strategy.
 *
 * One thread: poll() over stdin and a stop pipe, one fixed 1 MiB buffer,
 * flushed as a chunk when full, at EOF, or when input pauses for 20 ms (so
 * an interactive producer is not held back). Chunk PUTs are idempotent
 * (same name, same bytes, atomic replace), so a failed one is resent.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/stdin_exec.h"

#define PROBE_FIRST_MS 40   /* wait for a first byte */
#define PROBE_NEXT_MS 20    /* and for each next read */
#define PAUSE_MS 20         /* flush a partial chunk after this pause */
#define PUT_BUDGET_MS 60000 /* give up on a chunk after this long */

struct mbx_uploader {
	struct mbx_run *r;
	int fd;
	char run_dir[128];
	unsigned char *buf;      /* MBX_UP_CHUNK */
	size_t len;
	bool in_eof;             /* fd has ended */
	int stop_pipe[2];
	pthread_t th;
	bool joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* protected by mu: */
	long consumed;           /* chunks the guest reader has taken */
	long next;               /* index of the next chunk to upload */
	bool waiting;            /* blocked on the window */
	bool stop;
	bool failed;
	bool done;               /* the thread has returned */
	char msg[700];
};

int mbx_stdin_probe(int fd, size_t limit, unsigned char **data, size_t *len,
		    bool *eof)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t cap = limit + 1, n = 0;
	unsigned char *b = malloc(cap);
	ssize_t got;
	int pr;

	if (!b)
		return -ENOMEM;
	*eof = false;
	while (n < cap) {
		pr = poll(&pfd, 1, n ? PROBE_NEXT_MS : PROBE_FIRST_MS);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			break;
		got = read(fd, b + n, cap - n);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0) {
			/* an unreadable stdin counts as empty */
			*eof = true;
			break;
		}
		n += (size_t)got;
	}
	if (!n) {
		free(b);
		b = NULL;
	}
	*data = b;
	*len = n;
	return 0;
}

static bool stopped(struct mbx_uploader *u)
{
	bool s;

	pthread_mutex_lock(&u->mu);
	s = u->stop;
	pthread_mutex_unlock(&u->mu);
	return s;
}

static void set_failed(struct mbx_uploader *u, const char *what, const char *why)
{
	pthread_mutex_lock(&u->mu);
	if (!u->stop && !u->failed) {
		u->failed = true;
		snprintf(u->msg, sizeof(u->msg), "%s: %s", what, why);
	}
	pthread_mutex_unlock(&u->mu);
}

/* PUT one file, resending on faults that may be transient. 0, or -1 when
 * stopped or failed for good. */
static int put(struct mbx_uploader *u, const char *name, const void *p, size_t n)
{
	uint64_t t0 = mb_now_ms();
	char path[192];
	struct mb_err err;
	unsigned attempt = 0;

	snprintf(path, sizeof(path), "%s/%s", u->run_dir, name);
	for (;;) {
		if (stopped(u))
			return -1;
		mb_err_clear(&err);
		if (mb_file_put(u->r->client, &u->r->ident, path, p, n, &err) == 0)
			return 0;
		/* the run directory is gone: the command has ended */
		if (err.http_status == 404 || stopped(u))
			return -1;
		if ((err.http_status >= 400 && err.http_status < 500 &&
		     err.http_status != 429) || mb_now_ms() - t0 > PUT_BUDGET_MS) {
			set_failed(u, "cannot forward stdin", err.msg);
			return -1;
		}
		mb_log(MB_LOG_DEBUG, "stdin chunk %s: %s; resending", name, err.msg);
		mb_sleep_ms(mb_backoff_ms(attempt++, 250, 4000));
	}
}

/* Upload the buffer as the next chunk once the window allows. */
static int flush_chunk(struct mbx_uploader *u)
{
	char name[32];
	long idx;

	pthread_mutex_lock(&u->mu);
	while (!u->stop && u->next >= u->consumed + MBX_UP_WINDOW) {
		u->waiting = true;
		pthread_cond_wait(&u->cv, &u->mu);
	}
	u->waiting = false;
	idx = u->next;
	pthread_mutex_unlock(&u->mu);
	snprintf(name, sizeof(name), "in.%06ld", idx);
	if (put(u, name, u->buf, u->len))
		return -1;
	pthread_mutex_lock(&u->mu);
	u->next++;
	pthread_mutex_unlock(&u->mu);
	u->len = 0;
	return 0;
}

static void *upload_main(void *arg)
{
	struct mbx_uploader *u = arg;
	struct pollfd pfd[2];
	char eofbuf[32];
	ssize_t got;
	int pr, n;

	pfd[0].fd = u->fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = u->stop_pipe[0];
	pfd[1].events = POLLIN;
	while (!u->in_eof) {
		if (u->len == MBX_UP_CHUNK && flush_chunk(u))
			goto out;
		pr = poll(pfd, 2, u->len ? PAUSE_MS : -1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			break;
		if (pfd[1].revents)
			goto out;
		if (pr == 0) {
			if (flush_chunk(u))
				goto out;
			continue;
		}
		got = read(u->fd, u->buf + u->len, MBX_UP_CHUNK - u->len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			mb_log(MB_LOG_WARN, "reading stdin: %s; sending EOF", strerror(errno));
		if (got <= 0)
			u->in_eof = true;
		else
			u->len += (size_t)got;
	}
	if (u->len && flush_chunk(u))
		goto out;
	pthread_mutex_lock(&u->mu);
	n = snprintf(eofbuf, sizeof(eofbuf), "%ld\n", u->next);
	pthread_mutex_unlock(&u->mu);
	put(u, "in.eof", eofbuf, (size_t)n);
out:
	pthread_mutex_lock(&u->mu);
	u->done = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

int mbx_uploader_start(struct mbx_run *r, int fd, const char *run_dir,
		       unsigned char *pre, size_t prelen, bool pre_eof,
		       struct mbx_uploader **out)
{
	struct mbx_uploader *u = calloc(1, sizeof(*u));
	int e;

	if (!u || !(u->buf = malloc(MBX_UP_CHUNK)) || prelen > MBX_UP_CHUNK) {
		if (u)
			free(u->buf);
		free(u);
		free(pre);
		return -ENOMEM;
	}
	u->r = r;
	u->fd = fd;
	snprintf(u->run_dir, sizeof(u->run_dir), "%s", run_dir);
	if (prelen)
		memcpy(u->buf, pre, prelen);
	free(pre);
	u->len = prelen;
	u->in_eof = pre_eof;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	if (pipe2(u->stop_pipe, O_CLOEXEC)) {
		e = errno;
		goto fail;
	}
	e = pthread_create(&u->th, NULL, upload_main, u);
	if (e) {
		close(u->stop_pipe[0]);
		close(u->stop_pipe[1]);
		goto fail;
	}
	*out = u;
	return 0;
fail:
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u->buf);
	free(u);
	return -e;
}

void mbx_uploader_consumed(struct mbx_uploader *u, long pos)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	if (pos > u->consumed) {
		u->consumed = pos;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
}

long mbx_uploader_waiting(struct mbx_uploader *u)
{
	long w = -1;

	if (!u)
		return -1;
	pthread_mutex_lock(&u->mu);
	if (u->waiting && !u->done)
		w = u->consumed;
	pthread_mutex_unlock(&u->mu);
	return w;
}

int mbx_uploader_failed(struct mbx_uploader *u, char *msg, size_t n)
{
	int f;

	if (!u)
		return 0;
	pthread_mutex_lock(&u->mu);
	f = u->failed;
	if (f)
		snprintf(msg, n, "%s", u->msg);
	pthread_mutex_unlock(&u->mu);
	return f;
}

void mbx_uploader_stop(struct mbx_uploader *u)
{
	struct timespec ts;
	ssize_t w;
	bool done;

	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	u->stop = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	w = write(u->stop_pipe[1], "x", 1);
	(void)w;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	pthread_mutex_lock(&u->mu);
	while (!u->done &&
	       pthread_cond_timedwait(&u->cv, &u->mu, &ts) != ETIMEDOUT)
		;
	done = u->done;
	pthread_mutex_unlock(&u->mu);
	if (!done) {
		/* stuck in a request: it dies with the process */
		mb_log(MB_LOG_DEBUG, "stdin uploader still busy; not waiting");
		u->r->threads_left = true;
		return;
	}
	pthread_join(u->th, NULL);
	close(u->stop_pipe[0]);
	close(u->stop_pipe[1]);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u->buf);
	free(u);
}
