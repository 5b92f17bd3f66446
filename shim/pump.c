/* pump.c: output sinks, the signal thread and the terminal (see pump.h).
 *
 * Like OpenBSD nc's pump: writes go through poll() on EAGAIN, and EINTR is
 * never an error. The signal thread never touches the network itself except
 * through the strategy's signal(), outside the lock.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/pump.h"
#include "shim/result.h"
#include "shim/strategy.h"

/* ---- sinks ---- */

void mbx_sink_init(struct mbx_sink *s, int fd, bool capture)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->capture = capture;
	mb_buf_init(&s->buf, MBX_JSON_CAP);
}

void mbx_sink_release(struct mbx_sink *s)
{
	mb_buf_release(&s->buf);
}

static int write_all(int fd, const char *p, size_t n)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t w;

	while (n) {
		w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		return w < 0 ? -errno : -EIO;
	}
	return 0;
}

int mbx_sink_write(struct mbx_sink *s, const void *p, size_t n)
{
	size_t room;
	int r;

	if (!n)
		return 0;
	s->bytes += n;
	if (s->capture) {
		room = s->buf.max - s->buf.len;
		if (n > room) {
			s->truncated = true;
			n = room;
		}
		if (n && mb_buf_append(&s->buf, p, n))
			s->truncated = true;
		return 0;
	}
	if (s->broken)
		return -EPIPE;
	r = write_all(s->fd, p, n);
	if (r == -EPIPE)
		s->broken = true;
	return r;
}

/* ---- signals ---- */

/* The signal thread only decides; a second thread (the actor) makes the
 * strategy's signal() calls, which may wait on the network. So a Ctrl-C is
 * always seen at once, even while the sandbox does not answer the one
 * before: that is when a second Ctrl-C makes mbexec give up (abandon). */
static sigset_t handled;
static pthread_t sig_thread, act_thread;
static pthread_cond_t sig_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t act_cv = PTHREAD_COND_INITIALIZER;
static int sig_busy;          /* protected by r->lock: a signal() call runs */
static uint64_t unacked_since; /* protected by r->lock: an interrupt or
                                  terminate not acted on yet */
static enum mbx_action unacked;  /* protected by r->lock: the greater */
static uint64_t last_int_ms;  /* only the signal thread */

static enum mbx_action action_for(int sig)
{
	uint64_t now = mb_now_ms();

	switch (sig) {
	case SIGINT:
		/* a second Ctrl-C within 2 s ends the command */
		if (last_int_ms && now - last_int_ms < 2000) {
			last_int_ms = now;
			return MBX_ACT_TERMINATE;
		}
		last_int_ms = now;
		return MBX_ACT_INTERRUPT;
	case SIGTERM:
	case SIGHUP:
		return MBX_ACT_TERMINATE;
	case SIGWINCH:
		return MBX_ACT_RESIZE;
	default:
		return MBX_ACT_NONE;
	}
}

/* Under r->lock: give up at once rather than queue action a for sig?
 * When the interrupt before is still not acted on after a while, or the
 * sandbox is known not to answer: then a second Ctrl-C, or a first
 * SIGTERM or SIGHUP (nobody to wait for). */
static bool escape(const struct mbx_run *r, enum mbx_action a, int sig)
{
	/* ending a command waits up to 2 s for it by design (TERM, then KILL) */
	uint64_t limit = unacked == MBX_ACT_TERMINATE ? MBX_ESCAPE_MS + 2500 :
			 MBX_ESCAPE_MS;

	if (a != MBX_ACT_INTERRUPT && a != MBX_ACT_TERMINATE)
		return false;
	if (unacked_since && (r->silent || mb_now_ms() - unacked_since >= limit))
		return true;
	return r->silent && sig != SIGINT;
}

/* Give up on the sandbox for sig (r->lock held): whatever waits for the
 * service is then cancelled by the caller, once it let go of the lock. */
static void abandon_locked(struct mbx_run *r, int sig)
{
	r->abandoned = true;
	r->abandoned_by = sig;
	pthread_cond_broadcast(&act_cv);
}

static void say_hint(void)
{
	mbx_note("the sandbox does not answer: Ctrl-C again to give up on it "
		 "(the command may go on running there)");
}

static void *signal_main(void *arg)
{
	struct mbx_run *r = arg;
	enum mbx_action a;
	bool hint;
	int sig;

	for (;;) {
		if (sigwait(&handled, &sig))
			continue;
		a = action_for(sig);
		if (a == MBX_ACT_NONE)
			continue;
		pthread_mutex_lock(&r->lock);
		if (r->finished || r->abandoned) {
			pthread_mutex_unlock(&r->lock);
			continue;
		}
		if (escape(r, a, sig)) {
			abandon_locked(r, sig);
			pthread_mutex_unlock(&r->lock);
			mb_log(MB_LOG_DEBUG, "signal %d: giving up on the sandbox", sig);
			/* whatever waits for the service returns now */
			mb_api_cancel_all();
			continue;
		}
		if (a == MBX_ACT_TERMINATE && !r->terminated_by)
			r->terminated_by = sig;
		/* a window change is applied (after the start), not lost */
		if (a == MBX_ACT_RESIZE) {
			r->resize_pending = true;
		} else {
			if (a >= r->pending) {
				r->pending = a;
				r->pending_signo = sig;
			}
			if (!unacked_since)
				unacked_since = mb_now_ms();
			if (a > unacked)
				unacked = a;
		}
		hint = r->silent && a == MBX_ACT_INTERRUPT;
		pthread_cond_broadcast(&act_cv);
		pthread_mutex_unlock(&r->lock);
		if (hint)
			say_hint();
	}
	return NULL;
}

/* The actor: the queued action's signal() call, once the command exists. */
static void *act_main(void *arg)
{
	struct mbx_run *r = arg;
	enum mbx_action a;
	bool resize;
	int sig;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->finished && !r->abandoned &&
		       !(r->started && (r->pending != MBX_ACT_NONE || r->resize_pending)))
			pthread_cond_wait(&act_cv, &r->lock);
		if (r->finished || r->abandoned)
			break;
		a = r->pending;
		sig = r->pending_signo;
		resize = r->resize_pending;
		r->pending = MBX_ACT_NONE;
		r->resize_pending = false;
		sig_busy++;
		pthread_mutex_unlock(&r->lock);
		if (resize)
			r->strategy->signal(r, MBX_ACT_RESIZE, SIGWINCH);
		if (a != MBX_ACT_NONE) {
			mb_log(MB_LOG_DEBUG, "signal %d: action %d", sig, (int)a);
			r->strategy->signal(r, a, sig);
		}
		pthread_mutex_lock(&r->lock);
		sig_busy--;
		/* acted on, unless another came meanwhile */
		if (a != MBX_ACT_NONE && r->pending == MBX_ACT_NONE) {
			unacked_since = 0;
			unacked = MBX_ACT_NONE;
		}
		pthread_cond_broadcast(&sig_cv);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int mbx_signals_start(struct mbx_run *r)
{
	struct sigaction sa;
	int e;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGWINCH);
	e = pthread_sigmask(SIG_BLOCK, &handled, NULL);
	if (e)
		return -e;
	e = pthread_create(&act_thread, NULL, act_main, r);
	if (e)
		return -e;
	pthread_detach(act_thread);
	e = pthread_create(&sig_thread, NULL, signal_main, r);
	if (e)
		return -e;
	pthread_detach(sig_thread);
	return 0;
}

void mbx_signals_ready(struct mbx_run *r)
{
	pthread_mutex_lock(&r->lock);
	r->started = true;
	pthread_cond_broadcast(&act_cv);
	pthread_mutex_unlock(&r->lock);
}

enum mbx_action mbx_signals_early(struct mbx_run *r, int *signo)
{
	enum mbx_action a;

	pthread_mutex_lock(&r->lock);
	a = r->pending;
	*signo = r->pending_signo;
	pthread_mutex_unlock(&r->lock);
	return a;
}

/* Silence found while a SIGTERM or SIGHUP (or a second Ctrl-C) waits to
 * be acted on: nobody is left to wait for, give up now. */
bool mbx_signals_silent(struct mbx_run *r, bool silent)
{
	bool give_up;

	pthread_mutex_lock(&r->lock);
	r->silent = silent;
	give_up = silent && !r->finished && !r->abandoned &&
		  unacked == MBX_ACT_TERMINATE;
	if (give_up)
		abandon_locked(r, r->terminated_by ? r->terminated_by : SIGTERM);
	if (!silent)
		r->key_int_ms = 0;
	pthread_mutex_unlock(&r->lock);
	if (give_up) {
		mb_log(MB_LOG_DEBUG, "silent with an end pending: giving up");
		mb_api_cancel_all();
	}
	return give_up;
}

/* Once the silence is said: a Ctrl-C that waits, or a -t Ctrl-C key
 * whose chunk never got to the sandbox (one that did went through; an
 * answer read after the key does not tell), counts as the first Ctrl-C,
 * and the hint says the next one gives up. */
void mbx_signals_said_silent(struct mbx_run *r)
{
	bool hint, key;

	pthread_mutex_lock(&r->lock);
	key = r->silent && !r->abandoned && r->key_int_ms;
	r->key_int_ms = 0;
	hint = r->silent && !r->abandoned && !key &&
	       unacked == MBX_ACT_INTERRUPT;
	pthread_mutex_unlock(&r->lock);
	if (key)
		kill(getpid(), SIGINT);   /* the signal thread hints */
	if (hint)
		say_hint();
}

int mbx_signals_abandoned(struct mbx_run *r)
{
	int by;

	pthread_mutex_lock(&r->lock);
	by = r->abandoned ? r->abandoned_by : 0;
	pthread_mutex_unlock(&r->lock);
	return by;
}

void mbx_signals_keys(struct mbx_run *r, const void *p, size_t n,
		      long chunk)
{
	bool silent;

	if (!memchr(p, 0x03, n))
		return;
	pthread_mutex_lock(&r->lock);
	silent = r->silent;
	if (!silent) {
		r->key_int_ms = mb_now_ms();
		r->key_chunk = chunk;
	}
	pthread_mutex_unlock(&r->lock);
	if (silent)
		kill(getpid(), SIGINT);   /* to the signal thread */
}

void mbx_signals_keys_sent(struct mbx_run *r, long chunk)
{
	pthread_mutex_lock(&r->lock);
	if (r->key_int_ms && chunk == r->key_chunk)
		r->key_int_ms = 0;
	pthread_mutex_unlock(&r->lock);
}

void mbx_signals_stop(struct mbx_run *r)
{
	pthread_mutex_lock(&r->lock);
	r->finished = true;
	pthread_cond_broadcast(&sig_cv);
	pthread_cond_broadcast(&act_cv);
	while (sig_busy)
		pthread_cond_wait(&sig_cv, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

int mbx_signals_sleep(struct mbx_run *r, unsigned ms)
{
	struct timespec ts;
	int stopped;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->lock);
	while (!r->finished &&
	       pthread_cond_timedwait(&sig_cv, &r->lock, &ts) != ETIMEDOUT)
		;
	stopped = r->finished;
	pthread_mutex_unlock(&r->lock);
	return stopped;
}

/* ---- terminal ---- */

static struct termios saved_tio;
static int saved_fd = -1;
static pthread_mutex_t term_lock = PTHREAD_MUTEX_INITIALIZER;

void mbx_term_restore(void)
{
	pthread_mutex_lock(&term_lock);
	if (saved_fd >= 0) {
		tcsetattr(saved_fd, TCSADRAIN, &saved_tio);
		saved_fd = -1;
		mbx_messages_raw(false);
	}
	pthread_mutex_unlock(&term_lock);
}

int mbx_term_raw(int fd)
{
	static int registered;
	struct termios t;

	if (tcgetattr(fd, &t))
		return -errno;
	pthread_mutex_lock(&term_lock);
	saved_tio = t;
	saved_fd = fd;
	pthread_mutex_unlock(&term_lock);
	if (!registered) {
		atexit(mbx_term_restore);
		registered = 1;
	}
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(fd, TCSADRAIN, &t)) {   /* keep typeahead */
		int e = errno;

		mbx_term_restore();
		return -e;
	}
	mbx_messages_raw(true);
	return 0;
}

void mbx_term_size(int *cols, int *rows)
{
	struct winsize ws;
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
			*cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
			*rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
			return;
		}
	}
	*cols = 80;
	*rows = 24;
}
