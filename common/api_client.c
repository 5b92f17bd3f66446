/* api_client.c: the client object, the per-container limiters and the
 * request runner with the retry rules of api.h (contract §7.1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"
#include "common/log.h"
#include "common/util.h"

#define TRANSIENT_TRIES 6          /* transport errors and 5xx */
#define DEFAULT_MAX_BODY (4u << 20)

int mb_api_global_init(void)
{
	return mb_http_global_init();
}

void mb_api_global_cleanup(void)
{
	mb_http_global_cleanup();
}

void mb_api_cancel_all(void)
{
	mb_http_cancel_all();
}

bool mb_api_cancelled(void)
{
	return mb_http_cancelled();
}

int mb_client_new(const struct mb_client_opts *opts, struct mb_client **out,
		  struct mb_err *err)
{
	struct mb_client *c;

	if (!opts || !opts->api_url || !opts->api_key)
		return mb_err_set(err, EINVAL, "client needs an API URL and key");
	c = calloc(1, sizeof(*c));
	if (!c)
		return mb_err_set(err, ENOMEM, "out of memory");
	c->api_url = strdup(opts->api_url);
	c->api_key = strdup(opts->api_key);
	if (!c->api_url || !c->api_key) {
		mb_client_free(c);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	while (*c->api_url && c->api_url[strlen(c->api_url) - 1] == '/')
		c->api_url[strlen(c->api_url) - 1] = '\0';
	c->connect_timeout_ms = opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : 10000;
	c->op_timeout_ms = opts->op_timeout_ms > 0 ? opts->op_timeout_ms : 60000;
	c->use_limiter = opts->use_limiter;
	c->log_requests = opts->log_requests;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void mb_client_free(struct mb_client *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nlims; i++)
		mb_limiter_free(c->lims[i].l);
	free(c->lims);
	if (c->api_key) {
		explicit_bzero(c->api_key, strlen(c->api_key));
		free(c->api_key);
	}
	free(c->api_url);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The limiter for container id, opened on first use. */
static int limiter_for(struct mb_client *c, const char *id,
		       struct mb_limiter **out, struct mb_err *err)
{
	struct lim_entry *v;
	struct mb_buf key;
	size_t i;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->nlims; i++) {
		if (strcmp(c->lims[i].id, id) == 0) {
			*out = c->lims[i].l;
			goto out;
		}
	}
	v = realloc(c->lims, (c->nlims + 1) * sizeof(*v));
	if (!v) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	c->lims = v;
	mb_buf_init(&key, 4096);
	if (mb_buf_appendf(&key, "%s %s", c->api_url, id)) {
		mb_buf_release(&key);
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	r = mb_limiter_open(key.data, &v[c->nlims].l, err);
	mb_buf_release(&key);
	if (r)
		goto out;
	snprintf(v[c->nlims].id, sizeof(v[c->nlims].id), "%s", id);
	*out = v[c->nlims].l;
	c->nlims++;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int build_url(struct mb_client *c, const struct mb_call *k,
		     struct mb_buf *u)
{
	const char *const *q;
	char sep = '?';
	int r;

	r = mb_buf_appends(u, c->api_url);
	if (!r)
		r = mb_buf_appends(u, k->route);
	if (!r && k->who) {
		r = mb_buf_appends(u, "?id=");
		if (!r)
			r = mb_http_append_escaped(u, k->who->id);
		sep = '&';
		if (!r && k->who->created_at[0]) {
			r = mb_buf_appends(u, "&createdAt=");
			if (!r)
				r = mb_http_append_escaped(u, k->who->created_at);
		}
	}
	for (q = k->query; !r && q && q[0]; q += 2) {
		r = mb_buf_append(u, &sep, 1);
		sep = '&';
		if (!r)
			r = mb_http_append_escaped(u, q[0]);
		if (!r)
			r = mb_buf_append(u, "=", 1);
		if (!r)
			r = mb_http_append_escaped(u, q[1]);
	}
	return r;
}

/* The API error code in an error body, "" when unreadable. */
static void error_code(const struct mb_http_resp *resp, char code[80])
{
	const char *s = NULL;
	cJSON *o;

	code[0] = '\0';
	if (!resp->body.len)
		return;
	o = cJSON_ParseWithLength(resp->body.data, resp->body.len);
	if (o && cJSON_IsObject(o) &&
	    mb_json_get_str(o, "error", false, &s, "", NULL) == 0 && s &&
	    strlen(s) < 80)
		snprintf(code, 80, "%s", s);
	cJSON_Delete(o);
}

void mb_call_what(char *out, size_t size, const char *verb, const char *path)
{
	snprintf(out, size, "%s '%.256s%s'", verb, path,
		 strlen(path) > 256 ? "..." : "");
}

int mb_call_json(const struct mb_call *k, const struct mb_http_resp *resp,
		 cJSON **out, struct mb_err *err)
{
	return mb_json_parse(resp->body.data, resp->body.len, out, k->what, err);
}

/* The operation deadline of this thread (mb_op_deadline), 0 for none. */
static __thread uint64_t op_deadline;

uint64_t mb_op_deadline(uint64_t deadline_ms)
{
	uint64_t prev = op_deadline;

	op_deadline = deadline_ms;
	return prev;
}

uint64_t mb_op_narrow(uint64_t deadline_ms)
{
	uint64_t prev = op_deadline;

	if (!prev || (deadline_ms && deadline_ms < prev))
		op_deadline = deadline_ms;
	return prev;
}

uint64_t mb_op_current(void)
{
	return op_deadline;
}

bool mb_op_expired(void)
{
	return op_deadline && mb_now_ms() >= op_deadline;
}

uint64_t mb_client_last_renew_ms(struct mb_client *c)
{
	return atomic_load(&c->last_renew_ms);
}

static int remaining(uint64_t deadline)
{
	uint64_t now = mb_now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

/* -v: one line per HTTP attempt, with the route (the path without its
 * query: no file names, never a credential), the status and the time;
 * for a transport failure, why (e's message names the service's origin
 * or the URL without its query, as the route). */
static void log_request(const struct mb_client *c, const struct mb_call *k,
			const struct mb_buf *url, int r, const struct mb_err *e,
			const struct mb_http_resp *resp, uint64_t ms)
{
	const char *p, *q;

	if (!c->log_requests || mb_log_get_level() < MB_LOG_INFO)
		return;
	p = strstr(url->data, "://");
	p = p ? strchr(p + 3, '/') : NULL;
	if (!p)
		p = "/";
	q = strchr(p, '?');
	if (r == 0 && resp->status >= 400 && !resp->stopped) {
		char code[80];

		/* "503 files_unavailable": what the service said, never a
		 * guess such as a timeout */
		error_code(resp, code);
		mb_log(MB_LOG_INFO, "%s %.*s %d %s %llu ms", k->method,
		       (int)(q ? q - p : (long)strlen(p)), p, resp->status,
		       code[0] ? code : "(no code)", (unsigned long long)ms);
	} else if (r == 0)
		mb_log(MB_LOG_INFO, "%s %.*s %d %llu ms", k->method,
		       (int)(q ? q - p : (long)strlen(p)), p, resp->status,
		       (unsigned long long)ms);
	else
		mb_log(MB_LOG_INFO, "%s %.*s failed (%s) %llu ms", k->method,
		       (int)(q ? q - p : (long)strlen(p)), p,
		       e->msg[0] ? e->msg : strerror(-r), (unsigned long long)ms);
}

/* A limiter slot by deadline, in short waits, so that mb_http_cancel_all()
 * also ends a wait for a slot that other processes hold. */
static int acquire(struct mb_limiter *lim, uint64_t deadline,
		   struct mb_limit_slot **slot, struct mb_err *e)
{
	int r, left;

	for (;;) {
		if (mb_http_cancelled())
			return mb_err_set(e, ECANCELED, "cancelled");
		left = remaining(deadline);
		r = mb_limiter_acquire(lim, left < 250 ? left : 250, slot, e);
		if (r != -ETIMEDOUT || left < 250)
			return r;
	}
}

int mb_call_run(struct mb_client *c, const struct mb_call *k,
		struct mb_http_resp *resp, struct mb_err *err)
{
	long budget = k->budget_ms > 0 ? k->budget_ms : c->op_timeout_ms;
	uint64_t deadline = mb_now_ms() + (uint64_t)budget;
	unsigned busy_tries = 0, transient_tries = 0;
	uint64_t t_first = mb_now_ms(), t_try;
	bool lost = false;   /* an earlier attempt may have taken effect */
	bool told = false;   /* the user heard that we are still waiting */
	struct mb_limiter *lim = NULL;
	struct mb_http_req q;
	struct mb_err e;
	struct mb_buf url;
	char code[80];
	int r;

	mb_buf_init(&url, 64 * 1024);
	mb_err_clear(&e);
	if (op_deadline && op_deadline < deadline)
		deadline = op_deadline;
	if (op_deadline && remaining(op_deadline) == 0) {
		r = mb_err_set(err, ETIMEDOUT, "%s: the operation made no progress "
			       "for op_timeout", k->what);
		goto out;
	}
	if (build_url(c, k, &url)) {
		r = mb_err_set(err, ENAMETOOLONG, "%s: request URL too long", k->what);
		goto out;
	}
	if (k->pool && c->use_limiter && k->who) {
		r = limiter_for(c, k->who->id, &lim, err);
		if (r)
			goto out;
	}
	memset(&q, 0, sizeof(q));
	q.method = k->method;
	q.url = url.data;
	q.bearer = c->api_key;
	q.content_type = k->content_type;
	q.body = k->body;
	q.body_len = k->body_len;
	q.has_body = k->has_body;
	q.idempotency_key = k->idempotency_key;
	q.connect_timeout_ms = c->connect_timeout_ms;
	q.low_speed_secs = k->low_speed_secs;
	q.max_body = k->max_body ? k->max_body : DEFAULT_MAX_BODY;
	q.sink = k->sink;
	q.sink_ud = k->sink_ud;

	for (;;) {
		struct mb_limit_slot *slot = NULL;
		bool retry = false, maybe_done = false;
		uint64_t delay = 0;
		long left = remaining(deadline);

		if (lim) {
			r = acquire(lim, deadline, &slot, &e);
			if (r) {
				r = mb_err_set(err, -r, "%s: %s", k->what, e.msg);
				goto out;
			}
			left = remaining(deadline);
		}
		q.timeout_ms = left > k->min_timeout_ms ? left : k->min_timeout_ms;
		/* the operation's bound holds even for a long exec attempt */
		if (op_deadline && q.timeout_ms > remaining(op_deadline))
			q.timeout_ms = remaining(op_deadline);
		if (q.timeout_ms <= 0)
			q.timeout_ms = 1;
		t_try = mb_now_ms();
		r = mb_http_perform(&q, resp, &e);
		mb_limiter_release(slot);
		log_request(c, k, &url, r, &e, resp, mb_now_ms() - t_try);

		if (r == 0 && (resp->stopped ||
			       (resp->status >= 200 && resp->status < 300))) {
			/* a guest call that ran renewed the idle deadline
			 * (export is the one pool call that does not) */
			if (k->pool && k->op != MB_OP_EXPORT)
				atomic_store(&c->last_renew_ms, mb_now_ms());
			goto out;
		}
		if (r == 0) {
			error_code(resp, code);
			if (resp->status == 429 && strcmp(code, "execution_limit") == 0) {
				/* refused at admission: nothing ran, always safe */
				retry = true;
				delay = mb_backoff_ms(busy_tries++, 500, 5000);
			} else if (resp->status >= 500 &&
				   strcmp(code, "billing_unavailable") != 0) {
				maybe_done = true;
				if (k->retry == MB_RETRY_READ ||
				    (k->retry == MB_RETRY_KEYED &&
				     (resp->status == 503 || !code[0])))
					retry = transient_tries < TRANSIENT_TRIES;
				delay = mb_backoff_ms(transient_tries++, 200, 2000);
			}
		} else if (r != -EFBIG && r != -ENOMEM) {
			/* transport: a mutation that never left is safe to resend */
			maybe_done = resp->sent;
			/* a refused connection is tried 3 times, a certificate
			 * not accepted twice: the service is more likely down
			 * (or not the service) than restarting, so fail fast;
			 * a cancel (mb_api_cancel_all) never */
			if (r != -ECANCELED &&
			    (k->retry != MB_RETRY_MUTATION || !resp->sent))
				retry = transient_tries < (r == -EPROTO ? 1u :
							   r == -ECONNREFUSED ? 2u :
							   TRANSIENT_TRIES);
			delay = mb_backoff_ms(transient_tries++, 200, 2000);
		}
		if (retry && k->rewind && k->rewind(k->sink_ud) != 0)
			retry = false;
		if (retry && (uint64_t)remaining(deadline) > delay) {
			lost = lost || maybe_done;
			/* long waits are visible, once per call (-v shows each) */
			if (!told && mb_now_ms() - t_first >= MB_WAIT_NOTICE_MS) {
				char why[sizeof(e.msg)];

				told = true;
				if (r)
					snprintf(why, sizeof(why), "%s", e.msg);
				else
					snprintf(why, sizeof(why), "the service answers "
						 "HTTP %d %s", resp->status,
						 code[0] ? code : "(no code)");
				mb_log(MB_LOG_WARN, "%s: still waiting for the service "
				       "(%s); retrying for up to %d s more", k->what,
				       why, remaining(deadline) / 1000);
			}
			mb_log(MB_LOG_DEBUG, "%s: retrying in %llu ms (%s)", k->what,
			       (unsigned long long)delay,
			       r ? e.msg : (code[0] ? code : "server error"));
			mb_sleep_ms(delay);
			continue;
		}
		/* a mutation whose answer was lost may have taken effect; so may
		 * a keyed create that failed after a lost attempt */
		maybe_done = (maybe_done || lost) && k->retry != MB_RETRY_READ;
		if (r == 0 && retry) {
			/* out of time while the service kept refusing: the
			 * answer is the cause, the deadline only why we stop */
			char what[MB_WHAT_MAX + 64];

			snprintf(what, sizeof(what), "%s after %llu s of retries",
				 k->what, (unsigned long long)
				 (mb_now_ms() - t_first + 500) / 1000);
			r = mb_err_api(err, k->op, resp->status, code, what);
		} else if (r == 0)
			r = mb_err_api(err, k->op, resp->status, code, k->what);
		else
			r = mb_err_set(err, -r, "%s: %s%s", k->what, e.msg,
				       maybe_done ? " (it may or may not have taken effect)" : "");
		if (err && maybe_done)
			err->ambiguous = 1;
		goto out;
	}
out:
	mb_buf_release(&url);
	return r;
}
