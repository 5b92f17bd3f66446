/* result.c: error messages and the --json result object.
 *
 * mbx_error() is the one way strategies report a failure: a line on stderr
 * ("mbexec: problem...") that --json also puts in "error". The JSON writer
 * is hand-rolled because output is bytes: NUL is escaped as \u0000 and bytes
 * that are not UTF-8 become U+FFFD, so the object is always valid JSON;
 * "stdoutLossy"/"stderrLossy" say when that happened.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "shim/result.h"

static char last_error[1024];

static atomic_bool raw_tty;

void mbx_messages_raw(bool raw)
{
	atomic_store(&raw_tty, raw);
}

/* A -t terminal in raw mode does not return the carriage by itself. */
static const char *eol(void)
{
	return atomic_load(&raw_tty) && isatty(2) ? "\r\n" : "\n";
}

void mbx_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s%s", MBX_PROG, last_error, eol());
}

void mbx_note(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write: notes come from helper threads too */
	fprintf(stderr, "%s: note: %s%s", MBX_PROG, line, eol());
}

void mbx_gone(const struct mbx_run *r, const char *what)
{
	mbx_error("the sandbox %s (generation %s) is not running any more: it "
		  "was stopped, or reached its idle timeout or hard deadline; "
		  "%s. Unmount and mount its current generation again (mbfs "
		  "%s:/workspace DIR), or start a new sandbox with mbfs --create "
		  "DIR", r->ident.id, r->ident.created_at, what, r->ident.id);
}

const char *mbx_last_error(void)
{
	return last_error;
}


/* s as a JSON string; *lossy (when not NULL) set when a byte that is not
 * UTF-8 became U+FFFD. */
static int json_str_lossy(struct mb_buf *b, const char *s, size_t n,
			  bool *lossy)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, l;
	int r = mb_buf_append(b, "\"", 1);

	while (!r && i < n) {
		unsigned char c = p[i];

		if (c == '"' || c == '\\') {
			char esc[2] = { '\\', (char)c };

			r = mb_buf_append(b, esc, 2);
			i++;
		} else if (c == '\n') {
			r = mb_buf_append(b, "\\n", 2);
			i++;
		} else if (c == '\t') {
			r = mb_buf_append(b, "\\t", 2);
			i++;
		} else if (c == '\r') {
			r = mb_buf_append(b, "\\r", 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			r = mb_buf_appendf(b, "\\u%04x", c);
			i++;
		} else if ((l = mb_utf8_seq_len(p + i, n - i)) == 0) {
			r = mb_buf_appends(b, "\\ufffd");
			if (lossy)
				*lossy = true;
			i++;
		} else {
			r = mb_buf_append(b, p + i, l);
			i += l;
		}
	}
	return r ? r : mb_buf_append(b, "\"", 1);
}

static int json_str(struct mb_buf *b, const char *s, size_t n)
{
	return json_str_lossy(b, s, n, NULL);
}

int mbx_print_json(const struct mbx_run *r, const char *strategy,
		   bool has_status, int exit_status, const char *error)
{
	struct mb_buf b;
	uint64_t ms = r->end_ms > r->t0_ms ? r->end_ms - r->t0_ms : 0;
	bool out_lossy = false, err_lossy = false;
	char fallback[64];
	int e = 0;
	size_t w;

	mb_buf_init(&b, MB_BUF_UNLIMITED);
	/* the status mbexec exits with: 124 after --timeout, 128+N when
	 * mbexec itself was ended by signal N, else the command's */
	if (has_status)
		e = mb_buf_appendf(&b, "{\"exitCode\":%d,", exit_status);
	else
		e = mb_buf_appends(&b, "{\"exitCode\":null,");
	if (!e && r->term_signal)
		e = mb_buf_appendf(&b, "\"signal\":%d,", r->term_signal);
	else if (!e)
		e = mb_buf_appends(&b, "\"signal\":null,");
	e = e ? e : mb_buf_appendf(&b, "\"timedOut\":%s,\"stdout\":",
				   r->timed_out ? "true" : "false");
	e = e ? e : json_str_lossy(&b, r->out.buf.data ? r->out.buf.data : "",
				   r->out.buf.len, &out_lossy);
	e = e ? e : mb_buf_appends(&b, ",\"stderr\":");
	e = e ? e : json_str_lossy(&b, r->err.buf.data ? r->err.buf.data : "",
				   r->err.buf.len, &err_lossy);
	e = e ? e : mb_buf_appendf(&b,
		",\"stdoutLossy\":%s,\"stderrLossy\":%s,"
		"\"stdoutTruncated\":%s,\"stderrTruncated\":%s,"
		"\"executionTimeMs\":%llu,\"strategy\":",
		out_lossy ? "true" : "false", err_lossy ? "true" : "false",
		r->out.truncated ? "true" : "false",
		r->err.truncated ? "true" : "false", (unsigned long long)ms);
	e = e ? e : json_str(&b, strategy, strlen(strategy));
	e = e ? e : mb_buf_appends(&b, ",\"remoteId\":");
	if (!e && r->remote_id[0])
		e = json_str(&b, r->remote_id, strlen(r->remote_id));
	else if (!e)
		e = mb_buf_appends(&b, "null");
	/* no status: mbexec could not run or follow the command, and says
	 * why, whatever part failed */
	if (!has_status && (!error || !*error)) {
		snprintf(fallback, sizeof(fallback), "the command did not run or "
			 "was not followed to its end (exit %d)", exit_status);
		error = fallback;
	}
	if (!e && error && *error) {
		e = mb_buf_appends(&b, ",\"error\":");
		e = e ? e : json_str(&b, error, strlen(error));
	}
	e = e ? e : mb_buf_appends(&b, "}\n");
	if (!e) {
		w = fwrite(b.data, 1, b.len, stdout);
		if (w != b.len || fflush(stdout))
			e = -1;
	}
	mb_buf_release(&b);
	return e;
}
