/* api_jobs.c: managed executions (create, get, list, cancel, stdin,
 * signal, resize) and the summary JSON of contract §5.2. Following the
 * event stream is in api_follow.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"
#include "common/log.h"
#include "common/util.h"

bool mb_job_is_terminal(const struct mb_job *j)
{
	return strcmp(j->status, "starting") != 0 &&
	       strcmp(j->status, "running") != 0 && j->status[0];
}

int mb_job_parse(const cJSON *o, struct mb_job *out, const char *what,
		 struct mb_err *err)
{
	struct mb_job j;
	long long cursor = 0, code = 0;
	bool has_code = false;
	int r;

	memset(&j, 0, sizeof(j));
	if (!cJSON_IsObject(o))
		return mb_err_set(err, EPROTO, "%s: execution is not an object", what);
	if ((r = mb_json_get_strbuf(o, "id", true, j.id, sizeof(j.id), what, err)) ||
	    (r = mb_json_get_strbuf(o, "status", true, j.status, sizeof(j.status), what, err)) ||
	    (r = mb_json_get_strbuf(o, "startedAt", false, j.started_at,
				    sizeof(j.started_at), what, err)) ||
	    (r = mb_json_get_int(o, "retainUntil", false, &j.retain_until_ms, NULL, what, err)) ||
	    (r = mb_json_get_int(o, "cursor", false, &cursor, NULL, what, err)) ||
	    (r = mb_json_get_int(o, "outputBytes", false, &j.output_bytes, NULL, what, err)) ||
	    (r = mb_json_get_int(o, "exitCode", false, &code, &has_code, what, err)) ||
	    (r = mb_json_get_bool(o, "timedOut", false, &j.timed_out, what, err)) ||
	    (r = mb_json_get_bool(o, "outputTruncated", false, &j.output_truncated, what, err)) ||
	    (r = mb_json_get_bool(o, "stdinEnabled", false, &j.stdin_enabled, what, err)) ||
	    (r = mb_json_get_bool(o, "stdinClosed", false, &j.stdin_closed, what, err)) ||
	    (r = mb_json_get_int(o, "stdinBytes", false, &j.stdin_bytes, NULL, what, err)))
		return r;
	j.cursor = (long)cursor;
	j.exit_code = (int)code;
	j.has_exit_code = has_code;
	*out = j;
	return 0;
}

/* An execution id goes into the route: allow only a UUID's characters. */
int mb_job_route(char *out, size_t size, const char *eid, const char *suffix,
		 struct mb_err *err)
{
	size_t n = eid ? strlen(eid) : 0;

	if (!n || n > 40 || strspn(eid, "0123456789abcdefABCDEF-") != n)
		return mb_err_set(err, EINVAL, "invalid execution id '%.48s'", eid ? eid : "");
	snprintf(out, size, "/containers/executions/%s%s", eid, suffix);
	return 0;
}

static int add_env(cJSON *o, const char *const *env)
{
	cJSON *e;

	if (!env || !*env)
		return 0;
	e = cJSON_AddObjectToObject(o, "env");
	if (!e)
		return -ENOMEM;
	for (; *env; env++) {
		const char *eq = strchr(*env, '=');
		char name[80];

		if (!eq || eq == *env || (size_t)(eq - *env) >= sizeof(name))
			return -EINVAL;
		memcpy(name, *env, (size_t)(eq - *env));
		name[eq - *env] = '\0';
		cJSON_DeleteItemFromObjectCaseSensitive(e, name);
		if (!cJSON_AddStringToObject(e, name, eq + 1))
			return -ENOMEM;
	}
	return 0;
}

static int job_body(const struct mb_job_req *req, char **out, struct mb_err *err)
{
	cJSON *o = cJSON_CreateObject(), *a, *p;
	int r = -ENOMEM;

	if (!o)
		goto out;
	if (req->command) {
		if (!cJSON_AddStringToObject(o, "command", req->command))
			goto out;
	} else {
		const char *const *v;

		if (!(a = cJSON_AddArrayToObject(o, "argv")))
			goto out;
		for (v = req->argv; *v; v++) {
			cJSON *s = cJSON_CreateString(*v);

			if (!s)
				goto out;
			cJSON_AddItemToArray(a, s);
		}
	}
	if (req->timeout_ms > 0 &&
	    !cJSON_AddNumberToObject(o, "timeoutMs", (double)req->timeout_ms))
		goto out;
	if (req->stdin_enabled && !cJSON_AddBoolToObject(o, "stdin", 1))
		goto out;
	if (req->cwd && !cJSON_AddStringToObject(o, "cwd", req->cwd))
		goto out;
	if ((r = add_env(o, req->env)) != 0) {
		if (r == -EINVAL) {
			r = mb_err_set(err, EINVAL,
				       "cannot start the command: environment entries must be NAME=VALUE");
			goto done;
		}
		goto out;
	}
	r = -ENOMEM;
	if (req->pty_cols > 0 && req->pty_rows > 0) {
		if (!(p = cJSON_AddObjectToObject(o, "pty")) ||
		    !cJSON_AddNumberToObject(p, "cols", req->pty_cols) ||
		    !cJSON_AddNumberToObject(p, "rows", req->pty_rows))
			goto out;
	}
	*out = cJSON_PrintUnformatted(o);
	if (*out)
		r = 0;
out:
	if (r)
		r = mb_err_set(err, ENOMEM, "out of memory");
done:
	cJSON_Delete(o);
	return r;
}

int mb_job_create(struct mb_client *c, const struct mb_ident *who,
		  const struct mb_job_req *req, struct mb_job *out,
		  struct mb_err *err)
{
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot start the command",
		.method = "POST", .route = "/containers/executions", .who = who,
		.pool = true, .retry = MB_RETRY_KEYED,
		.content_type = "application/json", .has_body = true,
	};
	struct mb_http_resp resp;
	cJSON *doc = NULL;
	char *body = NULL;
	int r;

	if (!req->idempotency_key || !*req->idempotency_key)
		return mb_err_set(err, EINVAL, "cannot start the command: no idempotency key");
	if (!req->command == !req->argv || (req->argv && !req->argv[0]))
		return mb_err_set(err, EINVAL,
				  "cannot start the command: give exactly one of a command and an argv");
	if (req->timeout_ms < 0 || req->timeout_ms > MB_MAX_JOB_TIMEOUT_MS)
		return mb_err_set(err, EINVAL,
				  "cannot start the command: timeout %ld ms out of 1..%ld",
				  req->timeout_ms, MB_MAX_JOB_TIMEOUT_MS);
	r = job_body(req, &body, err);
	if (r)
		return r;
	if (strlen(body) > 32768) {
		free(body);
		return mb_err_set(err, E2BIG, "cannot start the command: request larger than 32 KiB");
	}
	k.body = body;
	k.body_len = strlen(body);
	k.idempotency_key = req->idempotency_key;
	mb_http_resp_init(&resp);
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = mb_call_json(&k, &resp, &doc, err)))
		goto out;
	r = mb_job_parse(doc, out, k.what, err);
out:
	cJSON_Delete(doc);
	free(body);
	mb_http_resp_release(&resp);
	return r;
}

int mb_job_get(struct mb_client *c, const struct mb_ident *who,
	       const char *eid, struct mb_job *out, struct mb_buf *stdout_out,
	       struct mb_buf *stderr_out, struct mb_err *err)
{
	char route[96];
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot read the execution",
		.method = "GET", .route = route, .who = who,
		.retry = MB_RETRY_READ, .max_body = 16u << 20,
	};
	size_t old_out = stdout_out ? stdout_out->len : 0, nso = 0, nse = 0;
	char *so = NULL, *se = NULL;
	struct mb_http_resp resp;
	cJSON *doc = NULL;
	struct mb_job j;
	int r;

	if ((r = mb_job_route(route, sizeof(route), eid, "", err)))
		return r;
	mb_http_resp_init(&resp);
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = mb_json_parse_keepnul(resp.body.data, resp.body.len, &doc, k.what, err)) ||
	    (r = mb_job_parse(doc, &j, k.what, err)) ||
	    (r = mb_json_get_bytes(doc, "stdout", false, &so, &nso, k.what, err)) ||
	    (r = mb_json_get_bytes(doc, "stderr", false, &se, &nse, k.what, err)))
		goto out;
	if ((stdout_out && so && mb_buf_append(stdout_out, so, nso)) ||
	    (stderr_out && se && mb_buf_append(stderr_out, se, nse))) {
		/* out-parameters change only on success */
		if (stdout_out && stdout_out->data) {
			stdout_out->len = old_out;
			stdout_out->data[old_out] = '\0';
		}
		r = mb_err_set(err, E2BIG, "%s: output does not fit the buffer", k.what);
		goto out;
	}
	*out = j;
out:
	free(so);
	free(se);
	cJSON_Delete(doc);
	mb_http_resp_release(&resp);
	return r;
}

int mb_job_list(struct mb_client *c, const struct mb_ident *who,
		struct mb_job **out, size_t *n, struct mb_err *err)
{
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot list executions",
		.method = "GET", .route = "/containers/executions", .who = who,
		.retry = MB_RETRY_READ,
	};
	struct mb_http_resp resp;
	const cJSON *arr = NULL, *it;
	struct mb_job *v = NULL;
	cJSON *doc = NULL;
	size_t cnt, i = 0;
	int r;

	mb_http_resp_init(&resp);
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = mb_call_json(&k, &resp, &doc, err)) ||
	    (r = mb_json_get_arr(doc, "executions", true, &arr, k.what, err)))
		goto out;
	cnt = (size_t)cJSON_GetArraySize(arr);
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(it, arr) {
		if ((r = mb_job_parse(it, &v[i++], k.what, err)))
			goto out;
	}
	*out = v;
	*n = cnt;
	v = NULL;
out:
	free(v);
	cJSON_Delete(doc);
	mb_http_resp_release(&resp);
	return r;
}

/* A small job route call whose answer body is not needed. */
static int job_simple(struct mb_client *c, struct mb_call *k,
		      struct mb_err *err)
{
	struct mb_http_resp resp;
	int r;

	mb_http_resp_init(&resp);
	r = mb_call_run(c, k, &resp, err);
	mb_http_resp_release(&resp);
	return r;
}

int mb_job_cancel(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, struct mb_err *err)
{
	char route[96];
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot cancel the execution",
		.method = "DELETE", .route = route, .who = who,
		.retry = MB_RETRY_READ,   /* cancel is idempotent */
	};
	int r = mb_job_route(route, sizeof(route), eid, "", err);

	return r ? r : job_simple(c, &k, err);
}

int mb_job_stdin(struct mb_client *c, const struct mb_ident *who,
		 const char *eid, const void *data, size_t len,
		 struct mb_err *err)
{
	char route[96];
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot send input to the execution",
		.method = "POST", .route = route, .who = who,
		.retry = MB_RETRY_MUTATION,
		.content_type = "application/octet-stream",
		.body = data, .body_len = len, .has_body = true,
	};
	uint64_t deadline = mb_now_ms() + (uint64_t)c->op_timeout_ms;
	unsigned tries = 0;
	int r;

	if ((r = mb_job_route(route, sizeof(route), eid, "/stdin", err)))
		return r;
	if (len > MB_MAX_STDIN_CHUNK)
		return mb_err_set(err, EMSGSIZE, "%s: chunk larger than 64 KiB", k.what);
	for (;;) {
		r = job_simple(c, &k, err);
		if (r == 0 || !err)
			return r;
		if (err->http_status == 503 && strcmp(err->code, "stdin_unavailable") == 0) {
			/* counted by the server and maybe still written: never
			 * replay, report it as sent */
			mb_log(MB_LOG_DEBUG, "stdin write unconfirmed; counted as sent");
			mb_err_clear(err);
			return 0;
		}
		if (err->http_status == 429 && strcmp(err->code, "stdin_limit") == 0) {
			/* pending bytes over the limit: nothing was taken */
			uint64_t d = mb_backoff_ms(tries++, 100, 2000);

			if (mb_now_ms() + d < deadline) {
				mb_sleep_ms(d);
				continue;
			}
		}
		return r;
	}
}

int mb_job_stdin_close(struct mb_client *c, const struct mb_ident *who,
		       const char *eid, struct mb_err *err)
{
	char route[96];
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot close the execution's input",
		.method = "DELETE", .route = route, .who = who,
		.retry = MB_RETRY_READ,   /* a repeat gives stdin_closed: done */
	};
	int r;

	if ((r = mb_job_route(route, sizeof(route), eid, "/stdin", err)))
		return r;
	r = job_simple(c, &k, err);
	if (r && err && err->http_status == 409 && strcmp(err->code, "stdin_closed") == 0) {
		mb_err_clear(err);
		r = 0;
	}
	return r;
}

int mb_job_signal(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, const char *sig, struct mb_err *err)
{
	char route[96], body[48];
	bool kill = sig && strcmp(sig, "SIGKILL") == 0;
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot signal the execution",
		.method = "POST", .route = route, .who = who,
		.retry = kill ? MB_RETRY_READ : MB_RETRY_MUTATION,
		.content_type = "application/json", .body = body, .has_body = true,
	};
	int r;

	if (!sig || (strcmp(sig, "SIGINT") && strcmp(sig, "SIGTERM") && !kill))
		return mb_err_set(err, EINVAL, "cannot signal the execution: unsupported signal '%.16s'",
				  sig ? sig : "");
	if ((r = mb_job_route(route, sizeof(route), eid, "/signal", err)))
		return r;
	snprintf(body, sizeof(body), "{\"signal\":\"%s\"}", sig);
	k.body_len = strlen(body);
	r = job_simple(c, &k, err);
	if (r && kill && err && err->http_status == 409 &&
	    strcmp(err->code, "execution_not_running") == 0) {
		mb_err_clear(err);
		r = 0;
	}
	return r;
}

int mb_job_resize(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, int cols, int rows, struct mb_err *err)
{
	char route[96], body[64];
	struct mb_call k = {
		.op = MB_OP_JOB, .what = "cannot resize the terminal",
		.method = "POST", .route = route, .who = who,
		.retry = MB_RETRY_READ,   /* setting a size twice is harmless */
		.content_type = "application/json", .body = body, .has_body = true,
	};
	int r;

	if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000)
		return mb_err_set(err, EINVAL, "cannot resize the terminal: %dx%d out of range",
				  cols, rows);
	if ((r = mb_job_route(route, sizeof(route), eid, "/resize", err)))
		return r;
	snprintf(body, sizeof(body), "{\"cols\":%d,\"rows\":%d}", cols, rows);
	k.body_len = strlen(body);
	return job_simple(c, &k, err);
}
