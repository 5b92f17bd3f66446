/* exec_aux.c: what runs beside the exec strategy's poll loop, and the one
 * way it talks to the guest.
 *
 * mbx_guest_call: one guest script, retried while that is safe.
 * Heartbeat: a thread that tells the guest watchdog mbexec is alive while
 * the poll loop cannot (blocked writing stdout).
 * Watchdog: a thread that says when the sandbox stops answering, and gives
 * up on it after mbx_lost_ms(); mbx_gave_up() says what that leaves.
 * Read-ahead: parallel polls for the next stdout ranges of bulk output.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/exec_int.h"
#include "shim/guest.h"
#include "shim/pump.h"
#include "shim/result.h"

unsigned mbx_orphan_seconds(void)
{
	const char *v = getenv("MBEXEC_ORPHAN_SECONDS");
	uint64_t n;

	if (v && mb_parse_u64(v, 4, 86400, &n) == 0)
		return (unsigned)n;
	return MBX_ORPHAN_S;
}

uint64_t mbx_lost_ms(void)
{
	const char *v = getenv("MBEXEC_LOST_SECONDS");
	uint64_t n;

	if (v && mb_parse_u64(v, 2, 3600, &n) == 0)
		return n * 1000;
	return MBX_LOST_S * 1000ull;
}

/* ---- one guest call ---- */

/* "cannot run the command: why" is the binding's word for any exec; for
 * our own scripts only the why means anything to the user. */
static void strip_what(struct mb_err *err)
{
	static const char what[] = "cannot run the command: ";
	size_t n = sizeof(what) - 1;

	if (!strncmp(err->msg, what, n))
		memmove(err->msg, err->msg + n, strlen(err->msg + n) + 1);
}

static int guest_call_loop(struct mbx_run *r, const struct mb_buf *line,
			   long timeout_ms, bool retry, struct mbx_report *rep,
			   bool *reached, struct mb_err *err)
{
	const struct mbx_exec_state *st = r->priv;
	uint64_t t0 = mb_now_ms(), budget = mbx_lost_ms();
	struct mb_exec_result res;
	unsigned attempt = 0;
	bool told = false;
	int e;

	for (;;) {
		mb_err_clear(err);
		memset(&res, 0, sizeof(res));
		e = mb_exec(r->client, &r->ident, line->data, timeout_ms, &res, err);
		strip_what(err);
		if (e == 0) {
			if (reached)
				*reached = true;
			if (!mb_exec_clean_take(&res)) {
				/* nothing of ours ran, and a profile that
				 * stops it will again: final, not ambiguous */
				e = mb_err_set(err, EPROTO, "the sandbox's login "
					       "shell did not run mbexec's script "
					       "(its profile?): %.120s",
					       res.errout ? res.errout : "");
				mb_exec_result_release(&res);
				return e;
			} else if (res.timed_out || res.output_truncated)
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
		/* never sent (common/ already retried), or refused, or given
		 * up on: final */
		if (!retry || e == -ECANCELED || mb_api_cancelled() ||
		    (!err->ambiguous && err->http_status < 500))
			return e;
		if (mb_now_ms() - t0 > budget)
			return e;
		mb_log(MB_LOG_DEBUG, "exec: %s; retrying", err->msg);
		/* long retries are visible, once per call (the watchdog's
		 * notice says it for a running command) */
		if (!told && mb_now_ms() - t0 >= MBX_WAIT_NOTICE_MS &&
		    !(st && st->wd_started)) {
			told = true;
			mb_log(MB_LOG_WARN, "still waiting for the sandbox (%s); "
			       "retrying for up to %llu s more", err->msg,
			       (unsigned long long)(budget - (mb_now_ms() - t0)) / 1000);
		}
		mb_sleep_ms(mb_backoff_ms(attempt++, 250, 4000));
	}
}

/* Every script runs in a clean shell (mb_exec_clean): the sandbox's
 * profile cannot put its own stat, base64, tail... in place of ours. Only
 * the launch keeps the login shell's exported variables, as text, for the
 * user's command (run.sh). */
static int guest_call(struct mbx_run *r, const struct mb_buf *script,
		      unsigned flags, long timeout_ms, unsigned wait_ms, bool retry,
		      struct mbx_report *rep, bool *reached, struct mb_err *err)
{
	struct mb_buf line;
	int e;

	mb_buf_init(&line, 2 * MB_MAX_COMMAND_BYTES + 4096);
	if (mb_exec_clean(&line, script->data, flags)) {
		mb_buf_release(&line);
		return mb_err_set(err, E2BIG, "the guest script is too long");
	}
	/* no attempt outlives the budget: a service that holds a request
	 * open would otherwise hold it for the whole exec timeout (a second
	 * more: where the watchdog counts, it gives up first, and says why) */
	uint64_t prev = mb_op_narrow(mb_now_ms() + wait_ms + mbx_lost_ms() + 1000);

	e = guest_call_loop(r, &line, timeout_ms, retry, rep, reached, err);
	mb_op_deadline(prev);
	mb_buf_release(&line);
	return e;
}

int mbx_guest_call(struct mbx_run *r, const struct mb_buf *script,
		   long timeout_ms, bool retry, struct mbx_report *rep,
		   bool *reached, struct mb_err *err)
{
	return guest_call(r, script, 0, timeout_ms, 0, retry, rep, reached, err);
}

int mbx_guest_poll_call(struct mbx_run *r, const struct mb_buf *script,
			long timeout_ms, unsigned wait_ms, struct mbx_report *rep,
			struct mb_err *err)
{
	return guest_call(r, script, 0, timeout_ms, wait_ms, true, rep, NULL, err);
}

int mbx_guest_launch_call(struct mbx_run *r, const struct mb_buf *script,
			  struct mbx_report *rep, bool *reached, struct mb_err *err)
{
	return guest_call(r, script, MB_EXEC_KEEP_ENV, MBX_LAUNCH_TIMEOUT_MS, 0,
			  true, rep, reached, err);
}

int mbx_deliver(struct mbx_run *r, struct mbx_sink *s, uint64_t *off,
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

/* ---- heartbeat ---- */

/* Wait on hb_cv for at most ms (hb_mu held): the heartbeat, the watchdog
 * and the probe each wake on a stop, or look again after their period. */
static void hb_wait(struct mbx_exec_state *st, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&st->hb_cv, &st->hb_mu, &ts);
}

void mbx_contact(struct mbx_exec_state *st)
{
	bool told;

	pthread_mutex_lock(&st->hb_mu);
	st->last_contact = st->alive_at = mb_now_ms();
	st->waiting_since = 0;
	told = st->told_silent && !st->lost;
	st->told_silent = false;
	pthread_mutex_unlock(&st->hb_mu);
	if (told) {
		mbx_signals_silent(st->r, false);
		mbx_note("the sandbox answers again");
	}
}

void mbx_waiting(struct mbx_exec_state *st)
{
	mbx_waiting_for(st, 0);
}

void mbx_waiting_for(struct mbx_exec_state *st, unsigned ms)
{
	pthread_mutex_lock(&st->hb_mu);
	if (!st->waiting_since)
		st->waiting_since = mb_now_ms() + ms;
	pthread_mutex_unlock(&st->hb_mu);
}

bool mbx_lost(struct mbx_exec_state *st)
{
	bool lost;

	pthread_mutex_lock(&st->hb_mu);
	lost = st->lost;
	pthread_mutex_unlock(&st->hb_mu);
	return lost;
}

/* Polls tell the guest watchdog that mbexec is alive. When the main thread
 * cannot poll (blocked writing to a stdout nobody reads for now), this
 * thread says so instead, so a paused pager does not get the command
 * ended. */
static void *heartbeat_main(void *arg)
{
	struct mbx_run *r = arg;
	struct mbx_exec_state *st = r->priv;
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;
	uint64_t every = MBX_HEARTBEAT_MS;
	bool beat;

	/* well inside the watchdog's patience, whatever it is */
	if (every > mbx_orphan_seconds() * 1000ull / 4)
		every = mbx_orphan_seconds() * 1000ull / 4;
	mb_buf_init(&b, 4096);
	pthread_mutex_lock(&st->hb_mu);
	while (!st->hb_stop) {
		hb_wait(st, 1000);
		beat = !st->hb_stop && mb_now_ms() - st->last_contact >= every;
		pthread_mutex_unlock(&st->hb_mu);
		if (beat) {
			mb_buf_reset(&b);
			if (mbx_guest_heartbeat(&b, st->run_id) == 0 &&
			    mbx_guest_call(r, &b, MBX_SIGNAL_TIMEOUT_MS, false, &rep,
					   NULL, &err) == 0) {
				mbx_report_release(&rep);
				mbx_contact(st);
			}
		}
		pthread_mutex_lock(&st->hb_mu);
	}
	pthread_mutex_unlock(&st->hb_mu);
	mb_buf_release(&b);
	return NULL;
}

int mbx_heartbeat_start(struct mbx_run *r, struct mbx_exec_state *st)
{
	int e = pthread_create(&st->hb_th, NULL, heartbeat_main, r);

	st->hb_started = e == 0;
	return -e;
}

void mbx_heartbeat_stop(struct mbx_exec_state *st)
{
	if (!st->hb_started)
		return;
	pthread_mutex_lock(&st->hb_mu);
	st->hb_stop = true;
	pthread_cond_broadcast(&st->hb_cv);
	pthread_mutex_unlock(&st->hb_mu);
	pthread_join(st->hb_th, NULL);
	st->hb_started = false;
}

/* ---- giving up ---- */

static const char *signal_word(int sig)
{
	return sig == SIGINT ? "Ctrl-C" : sig == SIGTERM ? "SIGTERM" :
	       sig == SIGHUP ? "SIGHUP" : "a signal";
}

int mbx_gave_up(struct mbx_run *r, struct mbx_exec_state *st, enum mbx_started s)
{
	unsigned orphan = mbx_orphan_seconds();
	int by = mbx_signals_abandoned(r);
	char why[128];

	if (by)
		snprintf(why, sizeof(why), "gave up on the sandbox, which does not "
			 "answer (%s)", signal_word(by));
	else if (mbx_lost(st))
		snprintf(why, sizeof(why), "the sandbox did not answer for %llu s",
			 (unsigned long long)mbx_lost_ms() / 1000);
	else
		return 0;
	if (s == MBX_STARTED)
		mbx_error("lost contact with the command: %s; it may still be "
			  "running (run id %s). To reattach, run `mbexec --attach "
			  "%s` in the same mount within %u s", why, st->run_id,
			  st->run_id, orphan);
	else if (s == MBX_MAYBE_STARTED)
		mbx_error("%s; the command may have started (run id %s: if it "
			  "did, `mbexec --attach %s` in the same mount within %u s "
			  "follows it)", why, st->run_id, st->run_id, orphan);
	else
		mbx_error("%s; the command did not start", why);
	return MBX_EXIT_FAIL;
}

/* ---- watchdog ---- */

static void say_silent(struct mbx_exec_state *st, bool launched, uint64_t quiet)
{
	unsigned left = (unsigned)((mbx_lost_ms() - quiet + 999) / 1000);

	if (mbx_signals_silent(st->r, true))
		return;   /* gave up: the reason follows */
	if (launched)
		mbx_note("the sandbox has not answered for %llu s; the command may "
			 "still be running there. Trying %u s more; to reattach "
			 "later: mbexec --attach %s (in this mount, within %u s)",
			 (unsigned long long)quiet / 1000, left, st->run_id,
			 mbx_orphan_seconds());
	else
		mbx_note("the sandbox has not answered for %llu s; the command may "
			 "have started there. Trying %u s more; if it did: mbexec "
			 "--attach %s (in this mount, within %u s)",
			 (unsigned long long)quiet / 1000, left, st->run_id,
			 mbx_orphan_seconds());
	mbx_signals_said_silent(st->r);
}

/* Counts the silence while mbexec waits for an answer: a poll answers
 * within its guest wait (counted from its end, mbx_waiting_for), and the
 * service answers a probe within MBX_PROBE_MS and a round trip; so
 * MBX_SILENT_MS of nothing beyond either is a service or a network that
 * stopped, said at once; mbx_lost_ms() of it ends the run. Separate from
 * the heartbeat, which may itself be waiting. */
static void *watch_main(void *arg)
{
	struct mbx_exec_state *st = arg;
	uint64_t quiet, lost_ms = mbx_lost_ms();
	bool say, launched;

	pthread_mutex_lock(&st->hb_mu);
	while (!st->hb_stop && !st->lost) {
		hb_wait(st, 250);
		uint64_t now = mb_now_ms();
		if (st->hb_stop || !st->waiting_since)
			continue;
		quiet = now > st->waiting_since ? now - st->waiting_since : 0;
		/* a probe sent since the last answer, not answered */
		if (st->probe_sent > st->alive_at && now - st->alive_at > quiet)
			quiet = now - st->alive_at;
		if (!quiet)
			continue;
		say = !st->told_silent && quiet >= MBX_SILENT_MS && quiet < lost_ms;
		st->told_silent = st->told_silent || say;
		launched = st->launched;
		if (quiet >= lost_ms)
			st->lost = true;
		pthread_mutex_unlock(&st->hb_mu);
		if (say)
			say_silent(st, launched, quiet);
		if (quiet >= lost_ms) {
			mb_log(MB_LOG_DEBUG, "no answer for %llu ms: giving up",
			       (unsigned long long)quiet);
			mb_api_cancel_all();
		}
		pthread_mutex_lock(&st->hb_mu);
	}
	pthread_mutex_unlock(&st->hb_mu);
	return NULL;
}

/* A poll may wait 15 s on the guest for output: whether the service is
 * there meanwhile is asked by a GET /containers every MBX_PROBE_MS, which
 * runs nothing on the sandbox, takes no slot of its pool and renews no
 * idle time. Each is bounded by a short deadline, so that stopping waits
 * for one probe at most that long. */
#define PROBE_DEADLINE_MS 3000
static void *probe_main(void *arg)
{
	struct mbx_exec_state *st = arg;

	pthread_mutex_lock(&st->hb_mu);
	while (!st->hb_stop && !st->lost) {
		hb_wait(st, 250);
		uint64_t now = mb_now_ms();
		if (st->hb_stop || !st->waiting_since ||
		    now - st->alive_at < MBX_PROBE_MS ||
		    now - st->probe_sent < MBX_PROBE_MS)
			continue;
		st->probe_sent = now;
		pthread_mutex_unlock(&st->hb_mu);
		struct mb_container *v = NULL;
		size_t n = 0;
		struct mb_err err;
		mb_err_clear(&err);
		mb_op_deadline(now + PROBE_DEADLINE_MS);
		int rc = mb_containers_list(st->r->client, &v, &n, &err);
		free(v);
		pthread_mutex_lock(&st->hb_mu);
		/* any HTTP answer, an error too, says the service is there */
		if ((!rc || err.http_status) && mb_now_ms() > st->alive_at)
			st->alive_at = mb_now_ms();
	}
	pthread_mutex_unlock(&st->hb_mu);
	return NULL;
}

int mbx_watch_start(struct mbx_run *r, struct mbx_exec_state *st)
{
	int e;

	st->r = r;
	st->alive_at = mb_now_ms();
	e = pthread_create(&st->wd_th, NULL, watch_main, st);
	st->wd_started = e == 0;
	if (!e && r->client) {
		st->pr_started = pthread_create(&st->pr_th, NULL, probe_main,
						st) == 0;
	}
	return -e;
}

void mbx_watch_stop(struct mbx_exec_state *st)
{
	if (!st->wd_started)
		return;
	pthread_mutex_lock(&st->hb_mu);
	st->hb_stop = true;
	pthread_cond_broadcast(&st->hb_cv);
	pthread_mutex_unlock(&st->hb_mu);
	pthread_join(st->wd_th, NULL);
	st->wd_started = false;
	if (st->pr_started)
		pthread_join(st->pr_th, NULL);
	st->pr_started = false;
}

/* Bulk output: while more than one answer's worth of stdout is waiting on
 * the guest, up to MBX_AHEAD_MAX extra polls fetch the next ranges in parallel
 * (stdout only), so `mbexec cat big` is not one round trip per 640 KiB. */
#define AHEAD_NO_ERR 9000000000000000000ull   /* an err offset past any end */

static void *ahead_main(void *arg)
{
	struct mbx_ahead *a = arg;
	struct mb_err err;
	struct mb_buf b;

	mb_buf_init(&b, 1u << 20);
	a->e = mbx_guest_poll(&b, a->run_id, a->off, AHEAD_NO_ERR, -1, 0, false);
	if (!a->e)
		a->e = mbx_guest_call(a->r, &b, MBX_POLL_TIMEOUT_MS, true, &a->rep,
				      NULL, &err);
	mb_buf_release(&b);
	return NULL;
}

size_t mbx_ahead_start(struct mbx_run *r, struct mbx_exec_state *st,
		       struct mbx_ahead *v)
{
	uint64_t pending = st->out_size - st->out_off;
	size_t n = 0;

	if (st->broken_pipe || st->out_size <= st->out_off)
		return 0;
	while (n < MBX_AHEAD_MAX && (n + 1) * (uint64_t)MBX_REPORT_RAW < pending) {
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
void mbx_ahead_finish(struct mbx_run *r, struct mbx_exec_state *st,
		      struct mbx_ahead *v, size_t n, bool deliver_them)
{
	size_t i;

	for (i = 0; i < n; i++) {
		pthread_join(v[i].th, NULL);
		if (v[i].e)
			continue;
		if (deliver_them && v[i].rep.out_off <= st->out_off &&
		    (v[i].rep.state == MBX_ST_RUNNING || v[i].rep.state == MBX_ST_DONE) &&
		    mbx_deliver(r, &r->out, &st->out_off, v[i].rep.out_off,
				v[i].rep.out_data, v[i].rep.out_len) == -EPIPE)
			st->broken_pipe = true;
		mbx_report_release(&v[i].rep);
	}
}

