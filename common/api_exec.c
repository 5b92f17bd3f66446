/* api_exec.c: foreground exec (POST /containers/exec). Not idempotent:
 * only a 429 execution_limit or a request that never left is resent. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"

void mb_exec_result_release(struct mb_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->errout);
	memset(r, 0, sizeof(*r));
}

static int blank(const char *s)
{
	for (; *s; s++)
		if (!isspace((unsigned char)*s))
			return 0;
	return 1;
}

/* The body is {"command":"...","timeoutMs":60000} at most, as cJSON
 * prints it: '"', '\\', \b \f \n \r \t take 2 bytes, other control
 * characters 6 (\u001f); everything else, UTF-8 included, goes as is. */
#define BODY_FRAME_BYTES (sizeof("{\"command\":\"\",\"timeoutMs\":60000}") - 1)

size_t mb_exec_text_bytes(const char *s, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\' || ch == '\b' || ch == '\f' ||
		    ch == '\n' || ch == '\r' || ch == '\t')
			total += 2;
		else if (ch < 0x20)
			total += 6;
		else
			total++;
	}
	return total;
}

size_t mb_exec_body_bytes(const char *command)
{
	return BODY_FRAME_BYTES + mb_exec_text_bytes(command, strlen(command));
}

bool mb_exec_fits(const char *command)
{
	return strlen(command) <= MB_MAX_COMMAND_BYTES &&
	       mb_exec_body_bytes(command) <= MB_MAX_EXEC_BODY_BYTES;
}

/* See api.h for why each word is there. */
#define CLEAN_KEEP "MBX_ENV=$(\\export -p) || \\exit 126; "
#define CLEAN_HEAD "\\unset -v LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT || \\exit 126; " \
	"\\exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "
#define CLEAN_KEEP_ARG "MBX_ENV=\"$MBX_ENV\" "
/* The script's first words print MB_EXEC_MARK on stdout and stderr, so
 * what the login shell printed before it (a profile's banner) can be told
 * from the script's own output (mb_exec_clean_take). Adjacent quoted
 * words join: 'printf ...; ''SCRIPT' is one argument. */
#define CLEAN_SH "/bin/sh -c 'printf \"\\036mb\\n\"; printf \"\\036mb\\n\" >&2; '"
#define MARK "\036mb\n"

int mb_exec_clean(struct mb_buf *out, const char *script, unsigned flags)
{
	size_t old = out->len;
	bool keep = flags & MB_EXEC_KEEP_ENV;
	int r = keep ? mb_buf_appends(out, CLEAN_KEEP) : 0;

	r = r ? r : mb_buf_appends(out, CLEAN_HEAD);
	if (!r && keep)
		r = mb_buf_appends(out, CLEAN_KEEP_ARG);
	r = r ? r : mb_buf_appends(out, CLEAN_SH);
	r = r ? r : mb_buf_append_shq(out, script);
	if (r) {
		out->len = old;
		if (out->data)
			out->data[old] = '\0';
	}
	return r;
}

/* Drop the bytes before the first MARK of text[0, *len) and the mark;
 * false when there is none. */
static bool after_mark(char *text, size_t *len)
{
	const char *m = text ? memmem(text, *len, MARK, sizeof(MARK) - 1) : NULL;

	if (!m)
		return false;
	size_t skip = (size_t)(m - text) + sizeof(MARK) - 1;
	memmove(text, text + skip, *len - skip);
	*len -= skip;
	text[*len] = '\0';
	return true;
}

bool mb_exec_clean_take(struct mb_exec_result *r)
{
	bool ran = after_mark(r->out, &r->out_len);

	if (!ran && r->out) {
		r->out_len = 0;
		r->out[0] = '\0';
	}
	if (!after_mark(r->errout, &r->err_len) && ran && r->errout) {
		r->err_len = 0;   /* cannot be: the marks go out together */
		r->errout[0] = '\0';
	}
	return ran;
}

static void measure(const char *s, size_t *len, size_t *cost)
{
	*len += strlen(s);
	*cost += mb_exec_text_bytes(s, strlen(s));
}

bool mb_exec_clean_fits(const char *script, unsigned flags)
{
	bool keep = flags & MB_EXEC_KEEP_ENV;
	size_t len = 0, cost = BODY_FRAME_BYTES, quotes = 0;

	if (keep) {
		measure(CLEAN_KEEP, &len, &cost);
		measure(CLEAN_KEEP_ARG, &len, &cost);
	}
	measure(CLEAN_HEAD, &len, &cost);
	measure(CLEAN_SH "''", &len, &cost);
	measure(script, &len, &cost);
	for (const char *p = script; *p; p++)
		quotes += *p == '\'';
	/* each ' becomes '\'' (3 more bytes, 4 once the \ is escaped) */
	return len + 3 * quotes <= MB_MAX_COMMAND_BYTES &&
	       cost + 4 * quotes <= MB_MAX_EXEC_BODY_BYTES;
}

int mb_exec(struct mb_client *c, const struct mb_ident *who,
	    const char *command, long timeout_ms, struct mb_exec_result *out,
	    struct mb_err *err)
{
	struct mb_call k = {
		.op = MB_OP_EXEC, .what = "cannot run the command",
		.method = "POST", .route = "/containers/exec", .who = who,
		.pool = true, .retry = MB_RETRY_MUTATION,
		.content_type = "application/json", .has_body = true,
		.max_body = 16u << 20,
	};
	struct mb_exec_result res;
	struct mb_http_resp resp;
	cJSON *o = NULL, *doc = NULL;
	long long code = 0;
	bool has_code = false;
	char *body = NULL;
	int r;

	memset(&res, 0, sizeof(res));
	mb_http_resp_init(&resp);
	if (!command || blank(command))
		return mb_err_set(err, EINVAL, "cannot run the command: it is empty");
	if (strlen(command) > MB_MAX_COMMAND_BYTES)
		return mb_err_set(err, E2BIG,
				  "cannot run the command: longer than %u bytes",
				  MB_MAX_COMMAND_BYTES);
	if (timeout_ms < 0 || timeout_ms > MB_MAX_EXEC_TIMEOUT_MS)
		return mb_err_set(err, EINVAL,
				  "cannot run the command: timeout %ld ms out of 1..%ld",
				  timeout_ms, MB_MAX_EXEC_TIMEOUT_MS);
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "command", command) ||
	    (timeout_ms > 0 && !cJSON_AddNumberToObject(o, "timeoutMs", (double)timeout_ms)) ||
	    !(body = cJSON_PrintUnformatted(o))) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	k.body = body;
	k.body_len = strlen(body);
	/* the server may take the whole command timeout before answering */
	k.min_timeout_ms = (timeout_ms > 0 ? timeout_ms : 30000) + 15000;
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = mb_json_parse_keepnul(resp.body.data, resp.body.len, &doc, k.what, err)) ||
	    (r = mb_json_get_int(doc, "exitCode", false, &code, &has_code, k.what, err)) ||
	    (r = mb_json_get_bool(doc, "timedOut", false, &res.timed_out, k.what, err)) ||
	    (r = mb_json_get_bool(doc, "outputTruncated", false,
				  &res.output_truncated, k.what, err)) ||
	    (r = mb_json_get_bytes(doc, "stdout", false, &res.out, &res.out_len, k.what, err)) ||
	    (r = mb_json_get_bytes(doc, "stderr", false, &res.errout, &res.err_len, k.what, err)))
		goto out;
	res.has_exit_code = has_code;
	res.exit_code = (int)code;
	/* the header promises text, never NULL */
	if ((!res.out && !(res.out = calloc(1, 1))) ||
	    (!res.errout && !(res.errout = calloc(1, 1)))) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	*out = res;
	memset(&res, 0, sizeof(res));
out:
	mb_exec_result_release(&res);
	free(body);
	cJSON_Delete(o);
	cJSON_Delete(doc);
	mb_http_resp_release(&resp);
	return r;
}
