/* strat_exec.c: the "exec" strategy: a detached guest process driven by
 * short foreground execs (the default).
 *
 * One launch exec starts the command in /tmp/.mbexec/RUNID and waits up to
 * ~1 s for it, so a short command costs one request. Then poll execs fetch
 * output from byte offsets (idempotent: retried on transport faults and 503
 * without losing or repeating a byte) until the command has ended and all
 * output is read. A lost or retried launch never starts the command twice
 * (guest.h). Signals become small kill execs. Nothing is retained by the
 * service, so the 32-job history is never touched.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/guest.h"
#include "shim/pump.h"
#include "shim/result.h"
#include "shim/stdin_exec.h"
#include "shim/strategy.h"

#define LAUNCH_TIMEOUT_MS 20000
#define POLL_TIMEOUT_MS 20000
#define SIGNAL_TIMEOUT_MS 15000
#define POLL_WAIT_MS 1000       /* guest long-poll */
#define RETRY_BUDGET_MS 60000   /* consecutive failures before giving up */

struct exec_state {
	char run_id[MBX_RUNID_HEX + 1];
	char run_dir[64];
	enum mbx_in_mode in_mode;
	unsigned char *pre;          /* probed stdin */
	size_t prelen;
	bool pre_eof;
	struct mbx_uploader *up;
	uint64_t out_off, err_off;   /* bytes delivered so far */
	uint64_t out_size, err_size; /* sizes in the last report */
	bool done;                   /* rc known */
	bool complete;               /* and all output delivered */
	int rc;
	bool term_sent;              /* the main thread ended the command */
	bool broken_pipe;
};

/* ---- one guest call ---- */

/* Run a script and parse its report. Transport faults, 5xx and unreadable
 * answers are retried for up to RETRY_BUDGET_MS when retry is set (the
 * script must be idempotent). *reached says whether any attempt may have
 * reached the guest. 0 or -errno with err filled. */
static int guest_call(struct mbx_run *r, const struct mb_buf *script,
		      long timeout_ms, bool retry, struct mbx_report *rep,
		      bool *reached, struct mb_err *err)
{
	uint64_t t0 = mb_now_ms();
	struct mb_exec_result res;
	unsigned attempt = 0;
	int e;

	for (;;) {
		mb_err_clear(err);
		memset(&res, 0, sizeof(res));
		e = mb_exec(r->client, &r->ident, script->data, timeout_ms, &res, err);
		if (e == 0) {
			if (reached)
				*reached = true;
			if (res.timed_out || res.output_truncated)
				e = mb_err_set(err, ETIMEDOUT, "the sandbox did not "
					       "answer in time (%s)",
					       res.timed_out ? "timed out" : "output cut");
			else if (mbx_report_parse(res.out, res.out_len, rep))
				e = mb_err_set(err, EPROTO, "unreadable answer from the "
					       "sandbox: %.120s", res.err_len ? res.errout :
					       res.out ? res.out : "");
			mb_exec_result_release(&res);
			if (e == 0)
				return 0;
			err->ambiguous = 1;
		} else if (err->ambiguous || err->http_status >= 500) {
			if (reached)
				*reached = true;
		}
		/* never sent (common/ already retried), or refused: final */
		if (!retry || (!err->ambiguous && err->http_status < 500))
			return e;
		if (mb_now_ms() - t0 > RETRY_BUDGET_MS)
			return e;
		mb_log(MB_LOG_DEBUG, "exec: %s; retrying", err->msg);
		mb_sleep_ms(mb_backoff_ms(attempt++, 250, 4000));
	}
}

/* ---- output ---- */

/* Deliver the new part of one stream's data (data starts at off_in). */
static int deliver(struct mbx_run *r, struct mbx_sink *s, uint64_t *off,
		   uint64_t off_in, const unsigned char *data, size_t len)
{
	uint64_t skip;

	if (off_in > *off)
		return -EPROTO;   /* a gap: cannot happen with offset polls */
	skip = *off - off_in;
	if (skip >= len)
		return 0;
	*off = off_in + len;
	if (mbx_sink_write(s, data + skip, len - (size_t)skip) == -EPIPE &&
	    s == &r->out)
		return -EPIPE;
	return 0;
}

static int consume(struct mbx_run *r, struct exec_state *st,
		   const struct mbx_report *rep)
{
	int e1, e2;

	e1 = deliver(r, &r->out, &st->out_off, rep->out_off, rep->out_data,
		     rep->out_len);
	e2 = deliver(r, &r->err, &st->err_off, rep->err_off, rep->err_data,
		     rep->err_len);
	if (e1 == -EPROTO || e2 == -EPROTO)
		return -EPROTO;
	if (e1 == -EPIPE)
		st->broken_pipe = true;
	mbx_uploader_consumed(st->up, rep->in_pos);
	st->out_size = rep->out_size;
	st->err_size = rep->err_size;
	if (rep->state == MBX_ST_DONE) {
		st->done = true;
		st->rc = rep->rc;
		st->complete = st->out_off >= rep->out_size &&
			       st->err_off >= rep->err_size;
	}
	return 0;
}

/* ---- signals ---- */

static void send_signal(struct mbx_run *r, const char *how)
{
	struct exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;

	mb_buf_init(&b, 64 * 1024);
	if (mbx_guest_signal(&b, st->run_id, how) == 0 &&
	    guest_call(r, &b, SIGNAL_TIMEOUT_MS, strcmp(how, "INT") != 0, &rep,
		       NULL, &err) == 0)
		mbx_report_release(&rep);
	else
		mb_log(MB_LOG_WARN, "cannot signal the command (SIG%s): %s", how,
		       err.msg);
	mb_buf_release(&b);
}

static void exec_signal(struct mbx_run *r, enum mbx_action a, int signo)
{
	(void)signo;
	if (a == MBX_ACT_INTERRUPT)
		send_signal(r, "INT");
	else if (a == MBX_ACT_TERMINATE)
		send_signal(r, "TERM");
}

/* ---- start ---- */

static int build_launch(struct mbx_run *r, struct exec_state *st,
			const char *script_path, struct mb_buf *b)
{
	struct mbx_launch l = {
		.run_id = st->run_id,
		.cwd = r->target->remote_cwd,
		.script = script_path ? NULL : r->script_exec,
		.script_path = script_path,
		.in_mode = st->in_mode,
		.in_data = st->pre,
		.in_len = st->prelen,
		.wait_ms = st->in_mode == MBX_IN_STREAM ? 200 : 1000,
	};

	if (r->deadline_ms) {
		uint64_t t = r->deadline_ms - r->t0_ms;

		if (t < l.wait_ms)
			l.wait_ms = (unsigned)(t < 50 ? 50 : t);
		/* a backstop for when mbexec itself is killed */
		l.guard_s = (unsigned)(t / 1000 + 10);
	}
	mb_buf_reset(b);
	return mbx_guest_launch(b, &l);
}

/* The launch must fit one exec command: drop embedded stdin (stream it),
 * then move the script to a guest file. 0, or an exit status. */
static int fit_launch(struct mbx_run *r, struct exec_state *st, struct mb_buf *b)
{
	char path[96];
	struct mb_err err;

	if (build_launch(r, st, NULL, b) == 0 && b->len <= MB_MAX_COMMAND_BYTES)
		return 0;
	if (st->in_mode == MBX_IN_EMBED) {
		st->in_mode = MBX_IN_STREAM;
		if (build_launch(r, st, NULL, b) == 0 && b->len <= MB_MAX_COMMAND_BYTES)
			return 0;
	}
	if (strlen(r->script_exec) > MB_MAX_FILE_BYTES) {
		mbx_error("the command is too long (%zu bytes, at most %u)",
			  strlen(r->script_exec), MB_MAX_FILE_BYTES);
		return MBX_EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "%s/%s.sh", MBX_RUN_BASE, st->run_id);
	mb_err_clear(&err);
	if (mb_fs_mkdir(r->client, &r->ident, MBX_RUN_BASE, true, 0700, &err) ||
	    mb_file_put(r->client, &r->ident, path, r->script_exec,
			strlen(r->script_exec), &err)) {
		mbx_error("cannot upload the command: %s; the command "
			"did not start", err.msg);
		return MBX_EXIT_FAIL;
	}
	if (build_launch(r, st, path, b) == 0 && b->len <= MB_MAX_COMMAND_BYTES)
		return 0;
	mbx_error("the remote directory name is too long");
	return MBX_EXIT_USAGE;
}

static int exec_start(struct mbx_run *r)
{
	struct exec_state *st = calloc(1, sizeof(*st));
	struct mbx_report rep;
	bool reached = false;
	struct mb_err err;
	struct mb_buf b;
	int e, ret = 0;

	if (!st) {
		mbx_error("out of memory");
		return MBX_EXIT_FAIL;
	}
	r->priv = st;
	mb_buf_init(&b, 1u << 20);
	if (mb_random_hex(st->run_id, MBX_RUNID_HEX / 2)) {
		mbx_error("no random numbers for a run id");
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	snprintf(st->run_dir, sizeof(st->run_dir), "%s/%s", MBX_RUN_BASE, st->run_id);
	snprintf(r->remote_id, sizeof(r->remote_id), "%s", st->run_id);

	st->in_mode = MBX_IN_NULL;
	if (r->forward_stdin) {
		if (mbx_stdin_probe(0, MBX_EMBED_STDIN, &st->pre, &st->prelen,
				    &st->pre_eof)) {
			mbx_error("out of memory");
			ret = MBX_EXIT_FAIL;
			goto out;
		}
		st->in_mode = st->pre_eof && st->prelen <= MBX_EMBED_STDIN ?
			      MBX_IN_EMBED : MBX_IN_STREAM;
	}
	ret = fit_launch(r, st, &b);
	if (ret)
		goto out;

	e = guest_call(r, &b, LAUNCH_TIMEOUT_MS, true, &rep, &reached, &err);
	if (e) {
		if (reached)
			mbx_error("%s; the command may have run (run id %s)",
				  err.msg, st->run_id);
		else
			mbx_error("%s; the command did not start", err.msg);
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	switch (rep.state) {
	case MBX_ST_RUNNING:
	case MBX_ST_DONE:
		break;
	case MBX_ST_NOCWD:
		mbx_error("the remote directory '%s' does not exist; the "
			"command did not start", r->target->remote_cwd);
		ret = MBX_EXIT_USAGE;
		goto out_rep;
	case MBX_ST_FAIL:
		mbx_error("the sandbox cannot run detached commands (%s); "
			"try --mode managed; the command did not start",
			rep.fail);
		ret = MBX_EXIT_FAIL;
		goto out_rep;
	default:
		mbx_error("the launch of run %s was interrupted on the "
			"sandbox; the command may not have started", st->run_id);
		ret = MBX_EXIT_FAIL;
		goto out_rep;
	}
	if (consume(r, st, &rep)) {
		mbx_error("inconsistent output offsets from the sandbox "
			"(run id %s)", st->run_id);
		ret = MBX_EXIT_FAIL;
		goto out_rep;
	}
	if (st->in_mode == MBX_IN_STREAM && !st->done) {
		e = mbx_uploader_start(r, 0, st->run_dir, st->pre, st->prelen,
				       st->pre_eof, &st->up);
		st->pre = NULL;
		if (e)
			mb_log(MB_LOG_WARN, "cannot forward stdin: %s", strerror(-e));
	}
	mbx_signals_ready(r);
out_rep:
	mbx_report_release(&rep);
out:
	mb_buf_release(&b);
	return ret;
}

/* ---- wait ---- */

/* Bulk output: while more than one answer's worth of stdout is waiting on
 * the guest, up to AHEAD_MAX extra polls fetch the next ranges in parallel
 * (stdout only), so `mbexec cat big` is not one round trip per 640 KiB. */
#define AHEAD_MAX 2
#define AHEAD_NO_ERR 9000000000000000000ull   /* an err offset past any end */

struct ahead {
	struct mbx_run *r;
	const char *run_id;
	uint64_t off;
	struct mbx_report rep;
	int e;
	pthread_t th;
};

static void *ahead_main(void *arg)
{
	struct ahead *a = arg;
	struct mb_err err;
	struct mb_buf b;

	mb_buf_init(&b, 1u << 20);
	a->e = mbx_guest_poll(&b, a->run_id, a->off, AHEAD_NO_ERR, -1, 0);
	if (!a->e)
		a->e = guest_call(a->r, &b, POLL_TIMEOUT_MS, true, &a->rep, NULL, &err);
	mb_buf_release(&b);
	return NULL;
}

static size_t ahead_start(struct mbx_run *r, struct exec_state *st,
			  struct ahead *v)
{
	uint64_t pending = st->out_size - st->out_off;
	size_t n = 0;

	if (st->broken_pipe || st->out_size <= st->out_off)
		return 0;
	while (n < AHEAD_MAX && (n + 1) * (uint64_t)MBX_REPORT_RAW < pending) {
		memset(&v[n], 0, sizeof(v[n]));
		v[n].r = r;
		v[n].run_id = st->run_id;
		v[n].off = st->out_off + (n + 1) * (uint64_t)MBX_REPORT_RAW;
		if (pthread_create(&v[n].th, NULL, ahead_main, &v[n]))
			break;
		n++;
	}
	mb_log(MB_LOG_DEBUG, "poll at %llu of %llu: %zu more in parallel",
	       (unsigned long long)st->out_off, (unsigned long long)st->out_size, n);
	return n;
}

/* Join the extra polls and deliver what continues stdout without a gap
 * (the main answer may have carried less stdout when stderr took room). */
static void ahead_finish(struct mbx_run *r, struct exec_state *st,
			 struct ahead *v, size_t n, bool deliver_them)
{
	size_t i;

	for (i = 0; i < n; i++) {
		pthread_join(v[i].th, NULL);
		if (v[i].e)
			continue;
		if (deliver_them && v[i].rep.out_off <= st->out_off &&
		    (v[i].rep.state == MBX_ST_RUNNING || v[i].rep.state == MBX_ST_DONE) &&
		    deliver(r, &r->out, &st->out_off, v[i].rep.out_off,
			    v[i].rep.out_data, v[i].rep.out_len) == -EPIPE)
			st->broken_pipe = true;
		mbx_report_release(&v[i].rep);
	}
}

/* End the command from the main thread (timeout, closed stdout...). */
static void terminate_once(struct mbx_run *r, struct exec_state *st)
{
	if (st->term_sent)
		return;
	st->term_sent = true;
	send_signal(r, "TERM");
}

static int exec_wait(struct mbx_run *r)
{
	struct exec_state *st = r->priv;
	struct ahead ahead[AHEAD_MAX];
	size_t nahead;
	struct mbx_report rep;
	char msg[300];
	struct mb_err err;
	struct mb_buf b;
	uint64_t now;
	unsigned wait;
	int e, ret = 0;

	mb_buf_init(&b, 1u << 20);
	while (!(st->done && st->complete)) {
		now = mb_now_ms();
		if (r->deadline_ms && now >= r->deadline_ms && !st->done) {
			r->timed_out = true;
			terminate_once(r, st);
		}
		if (st->broken_pipe) {
			/* nobody reads stdout any more: skip what is left of it */
			if (!st->done)
				terminate_once(r, st);
			if (st->out_off < st->out_size)
				st->out_off = st->out_size;
			if (st->done && st->err_off >= st->err_size) {
				st->complete = true;
				break;
			}
		}
		if (!st->done && !ret && mbx_uploader_failed(st->up, msg, sizeof(msg))) {
			mbx_error("%s; stopping the command", msg);
			terminate_once(r, st);
			ret = MBX_EXIT_FAIL;
		}
		wait = st->done ? 0 : POLL_WAIT_MS;
		if (r->deadline_ms && !r->timed_out && r->deadline_ms - now < wait)
			wait = (unsigned)(r->deadline_ms - now);
		mb_buf_reset(&b);
		if (mbx_guest_poll(&b, st->run_id, st->out_off, st->err_off,
				   mbx_uploader_waiting(st->up), wait)) {
			mbx_error("out of memory");
			ret = MBX_EXIT_FAIL;
			break;
		}
		nahead = ahead_start(r, st, ahead);
		e = guest_call(r, &b, POLL_TIMEOUT_MS, true, &rep, NULL, &err);
		if (e || (rep.state != MBX_ST_RUNNING && rep.state != MBX_ST_DONE)) {
			ahead_finish(r, st, ahead, nahead, false);
			nahead = 0;
		}
		if (e && mb_err_is_stopped(&err)) {
			mbx_error("%s; the container stopped, and the command "
				  "with it (run id %s)", err.msg, st->run_id);
			ret = MBX_EXIT_FAIL;
			break;
		}
		if (e) {
			mbx_error("lost contact with the command: %s; it may "
				"still be running (run id %s)", err.msg,
				st->run_id);
			ret = MBX_EXIT_FAIL;
			break;
		}
		if (rep.state != MBX_ST_RUNNING && rep.state != MBX_ST_DONE) {
			mbx_error("the run directory of %s vanished from the "
				"sandbox (was the container restarted?); output may be "
				"incomplete", st->run_id);
			mbx_report_release(&rep);
			ret = MBX_EXIT_FAIL;
			break;
		}
		e = consume(r, st, &rep);
		mbx_report_release(&rep);
		ahead_finish(r, st, ahead, nahead, e == 0);
		if (e == 0 && st->done)
			st->complete = st->out_off >= st->out_size &&
				       st->err_off >= st->err_size;
		if (e) {
			mbx_error("inconsistent output offsets from the "
				"sandbox (run id %s)", st->run_id);
			ret = MBX_EXIT_FAIL;
			break;
		}
	}
	mb_buf_release(&b);
	if (ret)
		return ret;
	r->status = st->rc;
	if (st->rc > 128 && st->rc <= 128 + 64)
		r->term_signal = st->rc - 128;
	if (st->broken_pipe && st->term_sent)
		r->status = 128 + SIGPIPE;
	return 0;
}

/* ---- finish ---- */

static void exec_finish(struct mbx_run *r)
{
	struct exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;

	if (!st)
		return;
	mbx_uploader_stop(st->up);
	/* small finished runs stay for a re-fetch until the guest's sweep;
	 * big ones (and streamed stdin) are removed now */
	if (st->done && st->complete &&
	    (st->out_size + st->err_size > MBX_RESULT_KEEP ||
	     st->in_mode == MBX_IN_STREAM)) {
		mb_buf_init(&b, 4096);
		if (mbx_guest_cleanup(&b, st->run_id) == 0 &&
		    guest_call(r, &b, SIGNAL_TIMEOUT_MS, false, &rep, NULL, &err) == 0)
			mbx_report_release(&rep);
		mb_buf_release(&b);
	}
	free(st->pre);
	free(st);
	r->priv = NULL;
}

const struct mbx_strategy mbx_strategy_exec = {
	.name = "exec",
	.start = exec_start,
	.wait = exec_wait,
	.signal = exec_signal,
	.finish = exec_finish,
};
