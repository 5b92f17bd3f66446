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
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/bulk.h"
#include "shim/exec_int.h"
#include "shim/guest.h"
#include "shim/mux.h"
#include "shim/pump.h"
#include "shim/result.h"
#include "shim/stdin_exec.h"
#include "shim/strategy.h"

/* ---- output ---- */

static int consume(struct mbx_run *r, struct mbx_exec_state *st,
		   const struct mbx_report *rep)
{
	int e1, e2;

	e1 = mbx_deliver(r, &r->out, &st->out_off, rep->out_off, rep->out_data,
			 rep->out_len);
	e2 = mbx_deliver(r, &r->err, &st->err_off, rep->err_off, rep->err_data,
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
	struct mbx_exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;

	mb_buf_init(&b, 64 * 1024);
	if (mbx_guest_signal(&b, st->run_id, how) == 0 &&
	    mbx_guest_call(r, &b, MBX_SIGNAL_TIMEOUT_MS, strcmp(how, "INT") != 0, &rep,
		       NULL, &err) == 0)
		mbx_report_release(&rep);
	else if (!mb_api_cancelled())   /* gave up: said otherwise */
		mb_log(MB_LOG_WARN, "cannot signal the command (SIG%s): %s", how,
		       err.msg);
	mb_buf_release(&b);
}

static void resize(struct mbx_run *r)
{
	struct mbx_exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;
	int cols, rows;

	mbx_term_size(&cols, &rows);
	mb_buf_init(&b, 64 * 1024);
	if (mbx_guest_resize(&b, st->run_id, (unsigned)cols, (unsigned)rows) == 0 &&
	    mbx_guest_call(r, &b, MBX_SIGNAL_TIMEOUT_MS, true, &rep, NULL, &err) == 0)
		mbx_report_release(&rep);
	else
		mb_log(MB_LOG_DEBUG, "cannot resize the terminal: %s", err.msg);
	mb_buf_release(&b);
}

static void exec_signal(struct mbx_run *r, enum mbx_action a, int signo)
{
	struct mbx_exec_state *st = r->priv;

	(void)signo;
	if (a == MBX_ACT_INTERRUPT)
		send_signal(r, "INT");
	else if (a == MBX_ACT_TERMINATE)
		send_signal(r, "TERM");
	else if (a == MBX_ACT_RESIZE && st->in_mode == MBX_IN_PTY)
		resize(r);
}

/* ---- start ---- */

static int build_launch(struct mbx_run *r, struct mbx_exec_state *st,
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
		/* a short command ends within the launch (one request); with a
		 * mount to share polls with, a long one should not hold one of
		 * the 4 operations for long just waiting */
		.wait_ms = st->in_mode == MBX_IN_STREAM ||
			   st->in_mode == MBX_IN_PTY ? 200 :
			   r->target->control.agent[0] ? MBX_LAUNCH_WAIT_SHARED_MS : 1000,
		.orphan_s = mbx_orphan_seconds(),
		.no_wait_output = r->opts->no_wait_output,
	};

	if (st->in_mode == MBX_IN_PTY) {
		int cols, rows;

		mbx_term_size(&cols, &rows);
		l.cols = cols > 0 && cols <= 1000 ? (unsigned)cols : 80;
		l.rows = rows > 0 && rows <= 1000 ? (unsigned)rows : 24;
		l.term = r->term;
	}

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
static int fit_launch(struct mbx_run *r, struct mbx_exec_state *st, struct mb_buf *b)
{
	char path[96];
	struct mb_err err;

	if (build_launch(r, st, NULL, b) == 0 && mb_exec_clean_fits(b->data, MB_EXEC_KEEP_ENV))
		return 0;
	if (st->in_mode == MBX_IN_EMBED) {
		st->in_mode = MBX_IN_STREAM;
		if (build_launch(r, st, NULL, b) == 0 && mb_exec_clean_fits(b->data, MB_EXEC_KEEP_ENV))
			return 0;
	}
	if (strlen(r->script_exec) > MB_MAX_FILE_BYTES) {
		mbx_error("the command is too long (%zu bytes, at most %u)",
			  strlen(r->script_exec), MB_MAX_FILE_BYTES);
		return MBX_EXIT_USAGE;
	}
	/* beside the run base, not in it: a PUT follows a planted symlink in
	 * its parents but never at its target (contract §4.3), and the
	 * launch, which checks the base, moves the file into the run */
	snprintf(path, sizeof(path), "%s-%s.sh", MBX_RUN_BASE, st->run_id);
	mb_err_clear(&err);
	if (mb_file_put(r->client, &r->ident, path, r->script_exec,
			strlen(r->script_exec), &err)) {
		mbx_error("cannot upload the command: %s; the command "
			"did not start", err.msg);
		return MBX_EXIT_FAIL;
	}
	if (build_launch(r, st, path, b) == 0 && mb_exec_clean_fits(b->data, MB_EXEC_KEEP_ENV))
		return 0;
	mbx_error("the remote directory name is too long");
	return MBX_EXIT_USAGE;
}

/* --attach: no launch; the first report starts where the lost mbexec's
 * last recorded poll left off. */
static int attach(struct mbx_run *r, struct mbx_exec_state *st, struct mb_buf *b)
{
	struct mbx_report rep;
	struct mb_err err;
	int ret = 0;

	pthread_mutex_lock(&st->hb_mu);
	st->launched = true;
	pthread_mutex_unlock(&st->hb_mu);
	mbx_waiting(st);
	if (mbx_guest_attach(b, st->run_id) ||
	    mbx_guest_call(r, b, MBX_POLL_TIMEOUT_MS, true, &rep, NULL, &err)) {
		if (mbx_gave_up(r, st, MBX_STARTED))
			;
		else if (mb_err_is_stopped(&err))
			mbx_gone(r, "the run ended with it");
		else
			mbx_error("cannot reach run %s: %s", st->run_id, err.msg);
		return MBX_EXIT_FAIL;
	}
	if (rep.state != MBX_ST_RUNNING && rep.state != MBX_ST_DONE) {
		mbx_error("no run %s on the sandbox (finished runs are kept for "
			  "a few minutes only)", st->run_id);
		ret = MBX_EXIT_FAIL;
	} else {
		st->out_off = rep.out_off;
		st->err_off = rep.err_off;
		if (consume(r, st, &rep)) {
			mbx_error("inconsistent output offsets from the sandbox "
				  "(run id %s)", st->run_id);
			ret = MBX_EXIT_FAIL;
		}
	}
	mbx_report_release(&rep);
	mbx_contact(st);
	if (!ret && !st->done) {
		if (mbx_heartbeat_start(r, st))
			mb_log(MB_LOG_DEBUG, "no heartbeat thread");
	}
	if (!ret)
		mbx_signals_ready(r);
	return ret;
}

static int exec_start(struct mbx_run *r)
{
	struct mbx_exec_state *st = calloc(1, sizeof(*st));
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
	st->r = r;
	st->mux_fd = -1;
	pthread_mutex_init(&st->hb_mu, NULL);
	pthread_cond_init(&st->hb_cv, NULL);
	mb_buf_init(&b, 1u << 20);
	if (mb_random_hex(st->run_id, MBX_RUNID_HEX / 2)) {
		mbx_error("no random numbers for a run id");
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	if (r->attach_id)
		snprintf(st->run_id, sizeof(st->run_id), "%s", r->attach_id);
	snprintf(st->run_dir, sizeof(st->run_dir), "%s/%s", MBX_RUN_BASE, st->run_id);
	snprintf(r->remote_id, sizeof(r->remote_id), "%s", st->run_id);
	if (mbx_watch_start(r, st))
		mb_log(MB_LOG_DEBUG, "no watchdog thread");
	if (r->attach_id) {
		ret = attach(r, st, &b);
		goto out;
	}

	st->in_mode = MBX_IN_NULL;
	if (r->pty) {
		/* script(1) on the guest gives the pty; stdin always streams */
		st->in_mode = MBX_IN_PTY;
	} else if (r->forward_stdin) {
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
	/* raw before the first output arrives (the remote pty already turned
	 * \n into \r\n), and a local Ctrl-C is then a byte for the remote
	 * terminal, as in ssh -t */
	if (st->in_mode == MBX_IN_PTY && r->stdin_tty && r->forward_stdin &&
	    mbx_term_raw(0) == 0)
		mb_log(MB_LOG_DEBUG, "local terminal in raw mode");

	mbx_waiting(st);
	e = mbx_guest_launch_call(r, &b, &rep, &reached, &err);
	if (e && mb_err_is_stopped(&err)) {
		mbx_gone(r, "the command did not start");
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	if (e) {
		if (mbx_gave_up(r, st, reached ? MBX_MAYBE_STARTED : MBX_NOT_STARTED))
			;
		else if (reached)
			mbx_error("cannot start the command: %s; it may have started "
				  "(run id %s: if it did, `mbexec --attach %s` in the "
				  "same mount within %u s follows it)", err.msg,
				  st->run_id, st->run_id, mbx_orphan_seconds());
		else
			mbx_error("%s; the command did not start", err.msg);
		ret = MBX_EXIT_FAIL;
		goto out;
	}
	pthread_mutex_lock(&st->hb_mu);
	st->launched = true;
	pthread_mutex_unlock(&st->hb_mu);
	mbx_contact(st);
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
	if (st->in_mode == MBX_IN_PTY && !r->forward_stdin)
		st->pre_eof = true;   /* the terminal reads EOF at once */
	if ((st->in_mode == MBX_IN_STREAM || st->in_mode == MBX_IN_PTY) &&
	    !st->done) {
		e = mbx_uploader_start(r, 0, st->run_dir, st->pre, st->prelen,
				       st->pre_eof, &st->up);
		st->pre = NULL;
		st->up_error = e;
	}
	if (!st->done && mbx_heartbeat_start(r, st))
		mb_log(MB_LOG_DEBUG, "no heartbeat thread");
	mbx_signals_ready(r);
out_rep:
	mbx_report_release(&rep);
out:
	mb_buf_release(&b);
	return ret;
}

/* ---- wait ---- */

/* End the command from the main thread (timeout, closed stdout...). */
static void terminate_once(struct mbx_run *r, struct mbx_exec_state *st)
{
	if (st->term_sent)
		return;
	st->term_sent = true;
	mbx_waiting(st);
	send_signal(r, "TERM");
}

/* One poll b (waiting up to wait ms on the guest): through the mount, with
 * every other running command's (one operation of the sandbox's 4 for all
 * of them), else, or when the mount's fails, directly with retries. 0 with
 * rep filled, or -errno with err. */
static int poll_once(struct mbx_run *r, struct mbx_exec_state *st,
		     const struct mb_buf *b, unsigned wait,
		     struct mbx_report *rep, struct mb_err *err)
{
	int e = -ENOTCONN;

	mbx_waiting_for(st, wait);
	if (wait && !st->mux_off) {
		e = mbx_mux_poll(r, &st->mux_fd, st->run_id, st->out_off,
				 st->err_off, mbx_uploader_waiting(st->up),
				 wait, rep, err);
		if (e == -ENOTCONN)
			st->mux_off = true;
		else if (e && !mb_err_is_stopped(err))
			e = -ENOTCONN;
	}
	if (e == -ENOTCONN)
		e = mbx_guest_poll_call(r, b, MBX_POLL_TIMEOUT_MS, wait, rep, err);
	if (e == 0)
		mbx_contact(st);
	return e;
}

static int exec_wait(struct mbx_run *r)
{
	struct mbx_exec_state *st = r->priv;
	struct mbx_ahead ahead[MBX_AHEAD_MAX];
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
		if (mbx_gave_up(r, st, MBX_STARTED)) {
			ret = MBX_EXIT_FAIL;
			break;
		}
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
		if (!st->done && !ret && st->up_error)
			snprintf(msg, sizeof(msg), "cannot forward stdin: %s",
				 strerror(-st->up_error));
		if (!st->done && !ret &&
		    (st->up_error || mbx_uploader_failed(st->up, msg, sizeof(msg)))) {
			mbx_error("%s; stopping the command", msg);
			terminate_once(r, st);
			ret = MBX_EXIT_FAIL;
		}
		/* megabytes waiting: GETs of 1 MiB pieces, not base64 polls */
		if (!st->broken_pipe && !st->bulk_off &&
		    st->out_size - st->out_off >= MBX_BULK_MIN) {
			mbx_waiting(st);
			if (mbx_bulk_fetch(r, st)) {
				st->bulk_off = true;
			} else {
				mbx_contact(st);
				continue;
			}
		}
		wait = st->done ? 0 : MBX_POLL_WAIT_MS;
		if (wait > mbx_orphan_seconds() * 200u)
			wait = mbx_orphan_seconds() * 200u;
		if (r->deadline_ms && !r->timed_out && r->deadline_ms - now < wait)
			wait = (unsigned)(r->deadline_ms - now);
		mb_buf_reset(&b);
		if (mbx_guest_poll(&b, st->run_id, st->out_off, st->err_off,
				   mbx_uploader_waiting(st->up), wait, true)) {
			mbx_error("out of memory");
			ret = MBX_EXIT_FAIL;
			break;
		}
		nahead = mbx_ahead_start(r, st, ahead);
		e = poll_once(r, st, &b, wait, &rep, &err);
		if (e || (rep.state != MBX_ST_RUNNING && rep.state != MBX_ST_DONE)) {
			mbx_ahead_finish(r, st, ahead, nahead, false);
			nahead = 0;
		}
		if (e && mb_err_is_stopped(&err)) {
			mbx_gone(r, "the command ended with it");
			ret = MBX_EXIT_FAIL;
			break;
		}
		if (e) {
			ret = mbx_gave_up(r, st, MBX_STARTED);
			if (!ret)
				mbx_error("lost contact with the command: %s; it may "
					"still be running (run id %s). To reattach, run "
					"`mbexec --attach %s` in the same mount within "
					"%u s", err.msg, st->run_id, st->run_id,
					mbx_orphan_seconds());
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
		mbx_ahead_finish(r, st, ahead, nahead, e == 0);
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
	struct mbx_exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;

	if (!st)
		return;
	mbx_watch_stop(st);
	mbx_heartbeat_stop(st);
	mbx_uploader_stop(st->up);
	if (st->mux_fd >= 0)
		close(st->mux_fd);
	/* small finished runs stay for a re-fetch until the guest's sweep;
	 * big ones (and streamed stdin) are removed now */
	if (st->done && st->complete &&
	    (st->out_size + st->err_size > MBX_RESULT_KEEP ||
	     st->in_mode == MBX_IN_STREAM || st->in_mode == MBX_IN_PTY)) {
		mb_buf_init(&b, 4096);
		if (mbx_guest_cleanup(&b, st->run_id) == 0 &&
		    mbx_guest_call(r, &b, MBX_SIGNAL_TIMEOUT_MS, false, &rep, NULL, &err) == 0)
			mbx_report_release(&rep);
		mb_buf_release(&b);
	}
	free(st->pre);
	pthread_mutex_destroy(&st->hb_mu);
	pthread_cond_destroy(&st->hb_cv);
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
