/* stdin_exec.c: probe and stream local stdin for the exec strategy.
 *
 * A reader thread poll()s stdin and a stop pipe and fills 1 MiB slots; a
 * slot is handed to the sender threads when full, at EOF, or when input
 * pauses for 20 ms (so an interactive producer is not held back; from a
 * terminal, after each read). Senders
 * PUT the lowest ready chunk first, so the guest, which reads them in
 * order, rarely waits for a late one. Chunk PUTs are idempotent (same
 * name, same bytes, atomic replace), so a failed one is resent.
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
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/pump.h"
#include "shim/stdin_exec.h"

#define PROBE_FIRST_MS 40   /* wait for a first byte */
#define PROBE_NEXT_MS 20    /* and for each next read */
#define PAUSE_MS 20         /* flush a partial chunk after this pause */
#define PUT_BUDGET_MS 60000 /* give up on a chunk after this long */
#define ASK_EVERY_MS 20     /* at most one in.pos GET per this while ahead */

enum slot_state { SLOT_FREE, SLOT_READY, SLOT_SENDING };

struct slot {
	unsigned char *buf;      /* MBX_UP_CHUNK */
	size_t len;
	long idx;                /* the chunk it holds (READY, SENDING) */
	enum slot_state state;
};

struct mbx_uploader {
	struct mbx_run *r;
	int fd;
	char run_dir[128];
	bool in_eof;             /* fd has ended */
	int stop_pipe[2];
	pthread_t reader;
	pthread_t sender[MBX_UP_PARALLEL];
	unsigned nthreads;       /* started: senders, then the reader */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* protected by mu: */
	struct slot slot[MBX_UP_SLOTS];   /* chunk i lives in slot i % SLOTS */
	long consumed;           /* chunks the guest reader has taken */
	long next;               /* index of the next chunk to fill */
	long sent;               /* chunks on the guest */
	uint64_t asked_ms;       /* last in.pos GET (reader only) */
	bool waiting;            /* the reader is blocked on the window */
	bool stop;
	bool failed;
	unsigned exited;         /* threads that have returned */
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

static void thread_exit(struct mbx_uploader *u)
{
	pthread_mutex_lock(&u->mu);
	u->exited++;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

/* Senders: PUT ready chunks, lowest index first, MBX_UP_PARALLEL at once. */
static void *send_main(void *arg)
{
	struct mbx_uploader *u = arg;
	struct slot *pick;
	char name[32];
	unsigned i;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		pick = NULL;
		for (i = 0; i < MBX_UP_SLOTS; i++)
			if (u->slot[i].state == SLOT_READY &&
			    (!pick || u->slot[i].idx < pick->idx))
				pick = &u->slot[i];
		if (u->stop || u->failed)
			break;
		if (!pick) {
			pthread_cond_wait(&u->cv, &u->mu);
			continue;
		}
		pick->state = SLOT_SENDING;
		pthread_mutex_unlock(&u->mu);
		snprintf(name, sizeof(name), "in.%06ld", pick->idx);
		if (put(u, name, pick->buf, pick->len)) {
			pthread_mutex_lock(&u->mu);
			/* failed for good (put said why), or the run has ended
			 * (404): either way nobody waits for more chunks */
			if (!u->failed)
				u->stop = true;
			pthread_cond_broadcast(&u->cv);
			break;
		}
		mbx_signals_keys_sent(u->r, pick->idx);
		pthread_mutex_lock(&u->mu);
		pick->state = SLOT_FREE;
		u->sent++;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	thread_exit(u);
	return NULL;
}

/* Read the guest reader's progress (RUNDIR/in.pos) with one small GET.
 * Reports come only with polls, and a long poll that started before the
 * window filled would hold the upload for up to its whole wait; a GET is
 * one cheap request of the files route. Reader thread, mu not held. */
static void ask_progress(struct mbx_uploader *u)
{
	char path[192], txt[24];
	struct mb_buf b;
	struct mb_err err;
	size_t n;

	u->asked_ms = mb_now_ms();
	snprintf(path, sizeof(path), "%s/in.pos", u->run_dir);
	mb_buf_init(&b, 64);
	mb_err_clear(&err);
	if (mb_file_get(u->r->client, &u->r->ident, path, &b, &err) == 0) {
		n = b.len < sizeof(txt) - 1 ? b.len : sizeof(txt) - 1;
		memcpy(txt, b.data, n);
		txt[n] = 0;
		mbx_uploader_consumed(u, strtol(txt, NULL, 10));
	}
	mb_buf_release(&b);
}

/* Hand the filling slot to the senders and take the next one once it has
 * been sent and the window allows (the guest holds at most MBX_UP_WINDOW
 * chunks not yet read). */
static int queue_chunk(struct mbx_uploader *u, struct slot **cur)
{
	unsigned pause = 5;
	bool full, ahead;
	int r = 0;

	pthread_mutex_lock(&u->mu);
	(*cur)->state = SLOT_READY;
	(*cur)->idx = u->next++;
	pthread_cond_broadcast(&u->cv);
	for (;;) {
		full = u->next >= u->consumed + MBX_UP_WINDOW;
		/* half the window ahead: learn the progress before it fills */
		ahead = u->next >= u->consumed + MBX_UP_WINDOW / 2;
		if (u->stop || u->failed ||
		    (!full && u->slot[u->next % MBX_UP_SLOTS].state == SLOT_FREE))
			break;
		if (!full) {
			pthread_cond_wait(&u->cv, &u->mu);
			continue;
		}
		u->waiting = true;
		pthread_mutex_unlock(&u->mu);
		if (mb_now_ms() - u->asked_ms < pause)
			mb_sleep_ms(pause);
		ask_progress(u);
		if (pause < 200)
			pause *= 2;
		pthread_mutex_lock(&u->mu);
	}
	u->waiting = false;
	ahead = !u->stop && !u->failed && ahead;
	if (u->stop || u->failed)
		r = -1;
	*cur = &u->slot[u->next % MBX_UP_SLOTS];
	(*cur)->len = 0;
	pthread_mutex_unlock(&u->mu);
	if (ahead && mb_now_ms() - u->asked_ms >= ASK_EVERY_MS)
		ask_progress(u);
	return r;
}

/* The reader: fills one slot from fd; a slot goes to the senders when full,
 * at EOF, or when input pauses. */
static void *read_main(void *arg)
{
	struct mbx_uploader *u = arg;
	struct slot *cur;
	/* a terminal's read is what was typed: a keystroke waits for nothing
	 * (a 20 ms pause was most of -t's echo time); a paste comes in few
	 * big reads */
	int pause_ms = u->r->stdin_tty ? 0 : PAUSE_MS;
	struct pollfd pfd[2];
	char eofbuf[32];
	ssize_t got;
	int pr, n;

	pthread_mutex_lock(&u->mu);
	cur = &u->slot[u->next % MBX_UP_SLOTS];
	pthread_mutex_unlock(&u->mu);
	pfd[0].fd = u->fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = u->stop_pipe[0];
	pfd[1].events = POLLIN;
	while (!u->in_eof) {
		if (cur->len == MBX_UP_CHUNK && queue_chunk(u, &cur))
			goto out;
		pr = poll(pfd, 2, cur->len ? pause_ms : -1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			break;
		if (pfd[1].revents)
			goto out;
		if (pr == 0) {
			if (queue_chunk(u, &cur))
				goto out;
			continue;
		}
		got = read(u->fd, cur->buf + cur->len, MBX_UP_CHUNK - cur->len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			mb_log(MB_LOG_WARN, "reading stdin: %s; sending EOF", strerror(errno));
		if (got <= 0) {
			u->in_eof = true;
		} else {
			if (u->r->pty && u->r->stdin_tty &&
			    memchr(cur->buf + cur->len, 0x03, (size_t)got)) {
				/* the filling chunk's index once queued: only
				 * this thread numbers them */
				pthread_mutex_lock(&u->mu);
				long idx = u->next;
				pthread_mutex_unlock(&u->mu);
				mbx_signals_keys(u->r, cur->buf + cur->len,
						 (size_t)got, idx);
			}
			cur->len += (size_t)got;
		}
	}
	if (cur->len && queue_chunk(u, &cur))
		goto out;
	/* in.eof counts the chunks; the guest stops at it only once it has
	 * read them all, but it goes up last so a reader of the directory
	 * never sees an end before the chunks */
	pthread_mutex_lock(&u->mu);
	while (!u->stop && !u->failed && u->sent < u->next)
		pthread_cond_wait(&u->cv, &u->mu);
	n = snprintf(eofbuf, sizeof(eofbuf), "%ld\n", u->next);
	pthread_mutex_unlock(&u->mu);
	put(u, "in.eof", eofbuf, (size_t)n);
out:
	thread_exit(u);
	return NULL;
}

static void uploader_free(struct mbx_uploader *u)
{
	unsigned i;

	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	for (i = 0; i < MBX_UP_SLOTS; i++)
		free(u->slot[i].buf);
	free(u);
}

int mbx_uploader_start(struct mbx_run *r, int fd, const char *run_dir,
		       unsigned char *pre, size_t prelen, bool pre_eof,
		       struct mbx_uploader **out)
{
	struct mbx_uploader *u = calloc(1, sizeof(*u));
	unsigned i;
	int e = ENOMEM;

	if (!u || prelen > MBX_UP_CHUNK) {
		free(u);
		free(pre);
		return -ENOMEM;
	}
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	for (i = 0; i < MBX_UP_SLOTS; i++)
		if (!(u->slot[i].buf = malloc(MBX_UP_CHUNK)))
			goto fail;
	u->r = r;
	u->fd = fd;
	snprintf(u->run_dir, sizeof(u->run_dir), "%s", run_dir);
	if (prelen)
		memcpy(u->slot[0].buf, pre, prelen);
	u->slot[0].len = prelen;
	u->in_eof = pre_eof;
	if (pipe2(u->stop_pipe, O_CLOEXEC)) {
		e = errno;
		goto fail;
	}
	e = 0;
	for (i = 0; i < MBX_UP_PARALLEL && !e; i++)
		if (!(e = pthread_create(&u->sender[i], NULL, send_main, u)))
			u->nthreads++;
	if (!e && !(e = pthread_create(&u->reader, NULL, read_main, u))) {
		u->nthreads++;
		free(pre);
		*out = u;
		return 0;
	}
	/* the senders that started exit at once */
	pthread_mutex_lock(&u->mu);
	u->stop = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (i = 0; i < u->nthreads; i++)
		pthread_join(u->sender[i], NULL);
	close(u->stop_pipe[0]);
	close(u->stop_pipe[1]);
fail:
	free(pre);
	uploader_free(u);
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
	if (u->waiting && u->exited < u->nthreads)
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
	unsigned i;
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
	while (u->exited < u->nthreads &&
	       pthread_cond_timedwait(&u->cv, &u->mu, &ts) != ETIMEDOUT)
		;
	done = u->exited == u->nthreads;
	pthread_mutex_unlock(&u->mu);
	if (!done) {
		/* stuck in a request: it dies with the process */
		mb_log(MB_LOG_DEBUG, "stdin uploader still busy; not waiting");
		u->r->threads_left = true;
		return;
	}
	for (i = 0; i < MBX_UP_PARALLEL; i++)
		pthread_join(u->sender[i], NULL);
	pthread_join(u->reader, NULL);
	close(u->stop_pipe[0]);
	close(u->stop_pipe[1]);
	uploader_free(u);
}
