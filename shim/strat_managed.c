/* strat_managed.c: the "managed" strategy: one managed execution.
 *
 * Used only when asked for with --mode managed (-t and -i use the exec
 * strategy, which has a pty too and no history limit). Output comes from
 * the SSE stream (mb_job_follow); stdin is POSTed in chunks of at most
 * 64 KiB by a thread, EOF is a DELETE. A running job takes one of the
 * container's 4 operation slots on the service, so a limiter slot is held
 * for its whole life. The service keeps every job for an hour and refuses
 * the 33rd: the message then says when a slot frees up.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/limiter.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/guest.h"
#include "shim/pump.h"
#include "shim/result.h"
#include "shim/strategy.h"

#define START_WAIT_MS 30000   /* for the job to leave "starting" */

/* The service's cap on a managed execution's output, stdout and stderr
 * together (contract: output_limit). */
#define MBX_MANAGED_OUTPUT_CAP (1024ull * 1024)

struct managed_state {
	char key[33];                 /* Idempotency-Key */
	char eid[40];
	struct mb_limiter *lim;
	struct mb_limit_slot *slot;
	bool raw;                     /* the local terminal is raw */
	pthread_t in_th;
	bool in_started;
	int stop_pipe[2];
	long cursor;
	bool canceled;                /* we canceled (timeout / terminate) */
	int sent_signal;              /* the last SIGINT/SIGTERM we sent */
	bool broken_pipe;
	unsigned long long out_bytes; /* output received: stdout + stderr */
	unsigned long events;         /* output events received */
};

/* ---- the history-limit message ---- */

static void history_full(struct mbx_run *r)
{
	struct mb_job *jobs = NULL;
	long long first = 0, now_ms, mins;
	struct timespec ts;
	char when[32] = "";
	struct mb_err err;
	struct tm tm;
	size_t n = 0, i;
	time_t t;

	mb_err_clear(&err);
	if (mb_job_list(r->client, &r->ident, &jobs, &n, &err) == 0) {
		for (i = 0; i < n; i++)
			if (jobs[i].retain_until_ms > 0 &&
			    (!first || jobs[i].retain_until_ms < first))
				first = jobs[i].retain_until_ms;
		free(jobs);
	}
	if (!first) {
		mbx_error("the sandbox already keeps %d managed executions (its "
			  "limit per hour); the next slot frees up within the hour. "
			  "Run without --mode managed to avoid the limit; the "
			  "command did not start", MB_MAX_RETAINED_JOBS);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	t = (time_t)(first / 1000);
	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	/* to the nearest minute, and never beyond the hour a record lives */
	mins = first > now_ms ? (first - now_ms + 30000) / 60000 : 0;
	if (mins > 60)
		mins = 60;
	mbx_error("the sandbox already keeps %d managed executions (its limit "
		  "per hour); the next slot frees up at %s (in %lld min). Run "
		  "without --mode managed to avoid the limit; the command "
		  "did not start", MB_MAX_RETAINED_JOBS, when,
		  mins);
}

/* ---- stdin ---- */

/* Wait for "running": stdin is refused while the job is "starting". */
static int wait_running(struct mbx_run *r, struct managed_state *st)
{
	struct pollfd stop = { .fd = st->stop_pipe[0], .events = POLLIN };
	uint64_t t0 = mb_now_ms();
	struct mb_job j;
	struct mb_err err;

	for (;;) {
		mb_err_clear(&err);
		if (mb_job_get(r->client, &r->ident, st->eid, &j, NULL, NULL, &err) == 0) {
			if (mb_job_is_terminal(&j))
				return -1;
			if (strcmp(j.status, "starting"))
				return 0;
		}
		if (mb_now_ms() - t0 > START_WAIT_MS)
			return -1;
		/* 50 ms, or less when we are told to stop */
		if (poll(&stop, 1, 50) > 0)
			return -1;
	}
}

static void *stdin_main(void *arg)
{
	struct mbx_run *r = arg;
	struct managed_state *st = r->priv;
	struct pollfd pfd[2];
	unsigned char buf[MB_MAX_STDIN_CHUNK];
	struct mb_err err;
	ssize_t got;
	int pr;

	if (wait_running(r, st))
		return NULL;
	pfd[0].fd = 0;
	pfd[0].events = POLLIN;
	pfd[1].fd = st->stop_pipe[0];
	pfd[1].events = POLLIN;
	while (r->forward_stdin) {
		pr = poll(pfd, 2, -1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0 || pfd[1].revents)
			return NULL;
		got = read(0, buf, sizeof(buf));
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			break;
		mb_err_clear(&err);
		if (mb_job_stdin(r->client, &r->ident, st->eid, buf, (size_t)got, &err)) {
			if (err.http_status == 409)
				return NULL;   /* ended, or input closed */
			if (err.http_status == 429)
				mb_log(MB_LOG_WARN, "stdin beyond %u bytes cannot reach a "
				       "managed execution; closing it", MB_MAX_STDIN_TOTAL);
			else
				mb_log(MB_LOG_WARN, "%s", err.msg);
			break;
		}
	}
	mb_err_clear(&err);
	if (mb_job_stdin_close(r->client, &r->ident, st->eid, &err) &&
	    err.http_status != 409)
		mb_log(MB_LOG_DEBUG, "%s", err.msg);
	return NULL;
}

/* ---- signals ---- */

static void cancel(struct mbx_run *r, struct managed_state *st)
{
	struct mb_err err;

	st->canceled = true;
	mb_err_clear(&err);
	if (mb_job_cancel(r->client, &r->ident, st->eid, &err))
		mb_log(MB_LOG_WARN, "%s", err.msg);
}

static void managed_signal(struct mbx_run *r, enum mbx_action a, int signo)
{
	struct managed_state *st = r->priv;
	struct mb_err err;
	int cols, rows;

	(void)signo;
	mb_err_clear(&err);
	switch (a) {
	case MBX_ACT_INTERRUPT:
		st->sent_signal = SIGINT;
		if (mb_job_signal(r->client, &r->ident, st->eid, "SIGINT", &err) &&
		    err.http_status != 409 && !mb_api_cancelled())
			mb_log(MB_LOG_WARN, "%s", err.msg);
		break;
	case MBX_ACT_TERMINATE:
		st->sent_signal = SIGTERM;
		if (mb_job_signal(r->client, &r->ident, st->eid, "SIGTERM", &err) &&
		    err.http_status != 409 && !mb_api_cancelled())
			mb_log(MB_LOG_WARN, "%s", err.msg);
		if (!mbx_signals_sleep(r, 2000))
			cancel(r, st);
		break;
	case MBX_ACT_RESIZE:
		if (!r->pty)
			break;
		mbx_term_size(&cols, &rows);
		if (mb_job_resize(r->client, &r->ident, st->eid, cols, rows, &err) &&
		    err.http_status != 409)
			mb_log(MB_LOG_DEBUG, "%s", err.msg);
		break;
	default:
		break;
	}
}

/* ---- start ---- */

/* The job's command: the script, then `exit $?`, which keeps the shell
 * alive so that a signal death reads 128+N. The JSON body must be UTF-8:
 * other bytes (in the script or the directory) travel as base64. */
static char *build_command(struct mbx_run *r)
{
	const char *cwd = r->target->remote_cwd;
	struct mb_buf b;
	int e = 0;

	mb_buf_init(&b, 4u << 20);
	if (!mb_utf8_valid(cwd, strlen(cwd))) {
		e = mbx_sh_assign(&b, "MBX_C", cwd);
		e = e ? e : mb_buf_appends(&b, "cd \"$MBX_C\" || exit 1; unset MBX_C\n");
	}
	if (!e && mb_utf8_valid(r->script, strlen(r->script))) {
		e = mb_buf_appends(&b, r->script);
	} else if (!e) {
		e = mbx_sh_assign(&b, "MBX_S", r->script);
		e = e ? e : mb_buf_appends(&b, "eval \"$MBX_S\"");
	}
	e = e ? e : mb_buf_appends(&b, "\nexit $?");
	if (e) {
		mb_buf_release(&b);
		return NULL;
	}
	return mb_buf_detach(&b, NULL);
}

static int managed_start(struct mbx_run *r)
{
	struct managed_state *st = calloc(1, sizeof(*st));
	struct mb_job_req req;
	struct mb_err err;
	struct mb_job job;
	char *cmd = NULL, lkey[MB_URL_MAX + MB_ID_MAX + 2];
	char term[MBX_TERM_MAX + 8];
	const char *env[2] = { NULL, NULL };
	int e, ret = 0;

	if (!st) {
		mbx_error("out of memory");
		return MBX_EXIT_FAIL;
	}
	st->stop_pipe[0] = st->stop_pipe[1] = -1;
	r->priv = st;
	cmd = build_command(r);
	if (!cmd) {
		mbx_error("out of memory");
		return MBX_EXIT_FAIL;
	}
	if (strlen(cmd) > MB_MAX_COMMAND_BYTES) {
		mbx_error("the command is too long for a managed execution (%zu "
			  "bytes, at most %u); run it without --mode managed",
			  strlen(cmd), MB_MAX_COMMAND_BYTES);
		ret = MBX_EXIT_USAGE;
		goto out;
	}
	if (mb_random_hex(st->key, 16)) {
		mbx_error("no random numbers for an idempotency key");
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.command = cmd;
	if (mb_utf8_valid(r->target->remote_cwd, strlen(r->target->remote_cwd)))
		req.cwd = r->target->remote_cwd;   /* else build_command cd's */
	req.stdin_enabled = r->forward_stdin || r->pty;
	req.idempotency_key = st->key;
	req.timeout_ms = MB_MAX_JOB_TIMEOUT_MS;
	if (r->deadline_ms && r->deadline_ms - r->t0_ms + 5000 < (uint64_t)req.timeout_ms)
		req.timeout_ms = (long)(r->deadline_ms - r->t0_ms + 5000);
	if (r->pty)
		mbx_term_size(&req.pty_cols, &req.pty_rows);
	/* the service's env is UTF-8 JSON: another TERM is not passed */
	if (r->pty && r->term && mb_utf8_valid(r->term, strlen(r->term))) {
		snprintf(term, sizeof(term), "TERM=%s", r->term);
		env[0] = term;
		req.env = env;
	}

	mb_err_clear(&err);
	e = mb_job_create(r->client, &r->ident, &req, &job, &err);
	if (e == -EUSERS || !strcmp(err.code, "execution_history_limit")) {
		history_full(r);
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	if (e) {
		if (err.ambiguous)
			mbx_error("%s; the command may have run (idempotency key %s)",
				  err.msg, st->key);
		else
			mbx_error("%s; the command did not start", err.msg);
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	snprintf(st->eid, sizeof(st->eid), "%s", job.id);
	snprintf(r->remote_id, sizeof(r->remote_id), "%s", job.id);
	mb_log(MB_LOG_INFO, "managed execution %s", st->eid);

	/* the running job counts toward the container's 4 operations */
	snprintf(lkey, sizeof(lkey), "%s %s", r->api_url, r->ident.id);
	mb_err_clear(&err);
	if (mb_limiter_open(lkey, &st->lim, &err) == 0 &&
	    mb_limiter_acquire(st->lim, -1, &st->slot, &err))
		st->slot = NULL;

	if (r->pty && r->stdin_tty && r->forward_stdin && mbx_term_raw(0) == 0)
		st->raw = true;
	if (req.stdin_enabled && pipe2(st->stop_pipe, O_CLOEXEC) == 0 &&
	    pthread_create(&st->in_th, NULL, stdin_main, r) == 0)
		st->in_started = true;
	mbx_signals_ready(r);
out:
	free(cmd);
	return ret;
}

/* ---- wait ---- */

/* Runs inside the SSE transfer: no requests from here (one curl handle per
 * thread), so a needed cancel stops the follow and is done by the caller. */
static int on_event(const struct mb_job_event *ev, void *ud)
{
	struct mbx_run *r = ud;
	struct managed_state *st = r->priv;

	if (ev->kind == MB_JOB_EV_STDOUT || ev->kind == MB_JOB_EV_STDERR) {
		st->out_bytes += ev->len;
		st->events++;
	}
	switch (ev->kind) {
	case MB_JOB_EV_STDOUT:
		if (mbx_sink_write(&r->out, ev->data, ev->len) == -EPIPE &&
		    !st->broken_pipe) {
			st->broken_pipe = true;
			return 1;
		}
		break;
	case MB_JOB_EV_STDERR:
		mbx_sink_write(&r->err, ev->data, ev->len);
		break;
	default:
		break;
	}
	if (r->deadline_ms && !r->timed_out && mb_now_ms() >= r->deadline_ms) {
		r->timed_out = true;
		return 1;
	}
	return 0;
}

static int managed_wait(struct mbx_run *r)
{
	struct managed_state *st = r->priv;
	struct mb_job fin;
	struct mb_err err;
	int by, e;

	for (;;) {
		mb_err_clear(&err);
		e = mb_job_follow(r->client, &r->ident, st->eid, &st->cursor, on_event,
				  r, &fin, &err);
		if (e <= 0)
			break;
		/* the callback asked for a cancel (timeout, closed stdout) */
		if (!st->canceled)
			cancel(r, st);
	}
	if (e) {
		mbx_term_restore();
		if (mbx_signals_abandoned(r))
			mbx_error("gave up on the sandbox, which does not answer; "
				  "the command may still be running (execution %s)",
				  st->eid);
		else
			mbx_error("lost the output of the command: %s; it may still "
				  "be running (execution %s)", err.msg, st->eid);
		return MBX_EXIT_FAIL;
	}
	pthread_mutex_lock(&r->lock);
	by = r->terminated_by;
	pthread_mutex_unlock(&r->lock);
	mbx_term_restore();
	if (!strcmp(fin.status, "succeeded")) {
		r->status = 0;
	} else if (!strcmp(fin.status, "failed") && fin.has_exit_code) {
		r->status = fin.exit_code & 0xff;
		if (r->status > 128 && r->status <= 128 + 64)
			r->term_signal = r->status - 128;
	} else if (!strcmp(fin.status, "failed") && st->sent_signal) {
		/* the job runs under GNU timeout, which dies of the signal the
		 * command died of: the service has no exit code to give */
		r->status = 128 + st->sent_signal;
		r->term_signal = st->sent_signal;
	} else if (!strcmp(fin.status, "timed_out")) {
		if (!r->timed_out)
			mbx_error("the command reached the service's limit of %ld min "
				  "for a managed execution (execution %s)",
				  MB_MAX_JOB_TIMEOUT_MS / 60000, st->eid);
		r->timed_out = true;
	} else if (!strcmp(fin.status, "canceled") &&
		   (st->canceled || r->timed_out || by)) {
		r->status = st->broken_pipe ? 128 + SIGPIPE : 128 + SIGKILL;
	} else if (!strcmp(fin.status, "output_limit") &&
		   st->out_bytes < MBX_MANAGED_OUTPUT_CAP) {
		/* a runtime that makes an event of every write stops a job
		 * after ~510 of them, however little they hold */
		mbx_error("the service stopped the command after %lu writes of "
			  "output (%llu bytes), its limit on output events for a "
			  "managed execution; run it without --mode managed, "
			  "which has no such limit (execution %s)", st->events,
			  st->out_bytes, st->eid);
		return MBX_EXIT_FAIL;
	} else if (!strcmp(fin.status, "output_limit")) {
		mbx_error("the command wrote more than 1 MiB, the service's limit "
			  "for a managed execution, and was stopped; run it without "
			  "--mode managed, which has no such limit (execution %s)",
			  st->eid);
		return MBX_EXIT_FAIL;
	} else {
		mbx_error("the managed execution %s ended as '%s'%s", st->eid,
			  fin.status, !strcmp(fin.status, "failed") ?
			  " without an exit code (it was killed by a signal, or "
			  "could not be started)" : "");
		return MBX_EXIT_FAIL;
	}
	return 0;
}

static void managed_finish(struct mbx_run *r)
{
	struct managed_state *st = r->priv;
	ssize_t w;

	if (!st)
		return;
	mbx_term_restore();
	if (st->in_started) {
		w = write(st->stop_pipe[1], "x", 1);
		(void)w;
		/* a thread inside a request may take a while: let it be */
		if (pthread_tryjoin_np(st->in_th, NULL)) {
			mb_sleep_ms(100);
			if (pthread_tryjoin_np(st->in_th, NULL)) {
				r->threads_left = true;
				return;   /* st stays allocated for the thread */
			}
		}
	}
	if (st->stop_pipe[0] >= 0) {
		close(st->stop_pipe[0]);
		close(st->stop_pipe[1]);
	}
	mb_limiter_release(st->slot);
	mb_limiter_free(st->lim);
	free(st);
	r->priv = NULL;
}

const struct mbx_strategy mbx_strategy_managed = {
	.name = "managed",
	.start = managed_start,
	.wait = managed_wait,
	.signal = managed_signal,
	.finish = managed_finish,
};
