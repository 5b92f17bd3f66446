/* api_follow.c: follow a managed execution's event stream (contract §5.4).
 *
 * One GET .../events?cursor=N per connection. The server closes after a
 * status frame: terminal means done, non-terminal is the 30 s rotation and
 * we reconnect at once. A connection that ends without a status frame
 * (reset, proxy timeout, internal error) is resumed from the last delivered
 * sequence after a short back-off. Sequences at or below *cursor are
 * dropped, so each one reaches the callback exactly once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"
#include "common/log.h"
#include "common/sse.h"
#include "common/util.h"

#define MAX_FRAME (4u << 20)
#define FOLLOW_STOP 1   /* sink return value: see ctx.stop / ctx.perr */

struct follow {
	long *cursor;
	mb_job_event_fn fn;
	void *ud;
	struct mb_sse sse;
	struct mb_job last;      /* the last status frame */
	bool got_status;
	bool progress;           /* something arrived on this connection */
	int stop;                /* the callback's non-zero value */
	int perr;                /* -errno of a malformed frame */
	struct mb_err *err;
	const char *what;
};

static int deliver(struct follow *f, const struct mb_job_event *ev)
{
	int r = f->fn ? f->fn(ev, f->ud) : 0;

	if (r) {
		f->stop = r;
		return FOLLOW_STOP;
	}
	return 0;
}

static int on_output(struct follow *f, const struct mb_sse_frame *fr,
		     enum mb_job_event_kind kind)
{
	struct mb_job_event ev;
	char *text = NULL;
	size_t len = 0;
	long long seq = 0;
	bool has_seq = false;
	cJSON *o = NULL;
	int r;

	r = mb_json_parse_keepnul(fr->data, fr->data_len, &o, f->what, f->err);
	if (!r)
		r = mb_json_get_int(o, "sequence", false, &seq, &has_seq, f->what, f->err);
	if (!r)
		r = mb_json_get_bytes(o, "data", true, &text, &len, f->what, f->err);
	if (!r && !has_seq) {
		uint64_t v;

		if (!fr->id || mb_parse_u64(fr->id, 1, (uint64_t)1 << 53, &v))
			r = mb_err_set(f->err, EPROTO, "%s: output event without a sequence",
				       f->what);
		else
			seq = (long long)v;
	}
	if (r) {
		f->perr = r;
		goto out;
	}
	if (seq > *f->cursor) {
		memset(&ev, 0, sizeof(ev));
		ev.kind = kind;
		ev.seq = (long)seq;
		ev.data = text;
		ev.len = len;
		*f->cursor = (long)seq;
		r = deliver(f, &ev);
	}
out:
	free(text);
	cJSON_Delete(o);
	return r ? FOLLOW_STOP : 0;
}

static int on_status(struct follow *f, const struct mb_sse_frame *fr)
{
	struct mb_job_event ev;
	cJSON *o = NULL;
	int r;

	r = mb_json_parse(fr->data, fr->data_len, &o, f->what, f->err);
	if (!r)
		r = mb_job_parse(o, &f->last, f->what, f->err);
	cJSON_Delete(o);
	if (r) {
		f->perr = r;
		return FOLLOW_STOP;
	}
	f->got_status = true;
	memset(&ev, 0, sizeof(ev));
	ev.kind = MB_JOB_EV_STATUS;
	ev.seq = *f->cursor;
	ev.job = &f->last;
	if (deliver(f, &ev))
		return FOLLOW_STOP;
	/* nothing follows a status frame; stop reading at once */
	return FOLLOW_STOP;
}

static int on_frame(const struct mb_sse_frame *fr, void *ud)
{
	struct follow *f = ud;

	f->progress = true;
	if (strcmp(fr->event, "stdout") == 0)
		return on_output(f, fr, MB_JOB_EV_STDOUT);
	if (strcmp(fr->event, "stderr") == 0)
		return on_output(f, fr, MB_JOB_EV_STDERR);
	if (strcmp(fr->event, "status") == 0)
		return on_status(f, fr);
	return 0;   /* an event type added later */
}

static int heartbeat(struct follow *f)
{
	struct mb_job_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = MB_JOB_EV_HEARTBEAT;
	ev.seq = *f->cursor;
	return deliver(f, &ev);
}

static int on_comment(const char *text, size_t len, void *ud)
{
	struct follow *f = ud;

	(void)text;
	(void)len;
	f->progress = true;
	return heartbeat(f);
}

static int sink(const char *p, size_t n, void *ud)
{
	struct follow *f = ud;
	int r = mb_sse_feed(&f->sse, p, n);

	if (r < 0) {
		f->perr = mb_err_set(f->err, EPROTO, "%s: event stream line too long",
				     f->what);
		return FOLLOW_STOP;
	}
	return r;
}

/* A retry inside mb_call_run is fine only before any byte was parsed. */
static int no_rewind(void *ud)
{
	struct follow *f = ud;

	return f->progress ? -1 : 0;
}

int mb_job_follow(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, long *cursor, mb_job_event_fn fn, void *ud,
		  struct mb_job *final, struct mb_err *err)
{
	char route[96], cur[24];
	const char *query[] = { "cursor", cur, NULL };
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot follow the execution",
		.method = "GET", .route = route, .who = who, .query = query,
		.retry = MB_RETRY_READ, .budget_ms = 24 * 3600 * 1000L,
		.max_body = 64 * 1024, .low_speed_secs = 20,
	};
	struct mb_http_resp resp;
	struct follow f;
	struct mb_err e;
	uint64_t stall_deadline;
	unsigned fails = 0;
	uint64_t opened;
	int r;

	if (!cursor || *cursor < 0)
		return mb_err_set(err, EINVAL, "%s: no valid cursor", k.what);
	if ((r = mb_job_route(route, sizeof(route), eid, "/events", err)))
		return r;
	memset(&f, 0, sizeof(f));
	f.cursor = cursor;
	f.fn = fn;
	f.ud = ud;
	f.err = &e;
	f.what = k.what;
	mb_sse_init(&f.sse, MAX_FRAME, on_frame, on_comment, &f);
	k.sink = sink;
	k.sink_ud = &f;
	k.rewind = no_rewind;
	mb_http_resp_init(&resp);
	stall_deadline = mb_now_ms() + (uint64_t)c->op_timeout_ms;
	for (;;) {
		mb_err_clear(&e);
		mb_sse_reset(&f.sse);
		f.got_status = false;
		f.progress = false;
		snprintf(cur, sizeof(cur), "%ld", *cursor);
		opened = mb_now_ms();
		r = mb_call_run(c, &k, &resp, &e);
		if (f.stop) {
			r = f.stop;
			goto out;
		}
		if (f.perr) {
			r = f.perr;
			if (err)
				*err = e;
			goto out;
		}
		if (f.got_status && mb_job_is_terminal(&f.last)) {
			if (final)
				*final = f.last;
			r = 0;
			goto out;
		}
		if (f.progress) {
			fails = 0;
			stall_deadline = mb_now_ms() + (uint64_t)c->op_timeout_ms;
		}
		if (f.got_status) {
			/* the 30 s rotation: resume at once (but never spin on a
			 * server that rotates at once) */
			if (mb_now_ms() - opened < 1000)
				mb_sleep_ms(100);
			continue;
		}
		/* 404: the record is gone; 400: bad cursor; 409...; or the
		 * program gave up on the service (mb_api_cancel_all) */
		if (r == -ECANCELED || (r && e.http_status >= 400 && e.http_status < 500 &&
		    !(e.http_status == 429 && strcmp(e.code, "execution_stream_limit") == 0))) {
			if (err)
				*err = e;
			goto out;
		}
		/* dropped, refused or busy: resume from the last sequence */
		{
			uint64_t d = mb_backoff_ms(fails++, 100, 2000);

			if (mb_now_ms() + d >= stall_deadline) {
				if (r == 0)
					r = mb_err_set(&e, EIO, "%s: the stream keeps ending without a status",
						       k.what);
				if (err)
					*err = e;
				goto out;
			}
			mb_log(MB_LOG_DEBUG, "%s: reconnecting at cursor %ld (%s)", k.what,
			       *cursor, r ? e.msg : "stream ended");
			mb_sleep_ms(d);
		}
		if (heartbeat(&f)) {
			r = f.stop;
			goto out;
		}
	}
out:
	mb_http_resp_release(&resp);
	mb_sse_release(&f.sse);
	return r;
}
