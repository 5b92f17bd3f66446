/* err.c: the one error channel of common/ and the API-code-to-errno table.
 *
 * The table below is the only place that turns an API error code into an
 * errno and a human explanation; mb_err_errno_for() is keyed by operation
 * so that a code can map differently per operation. Messages are lowercase, problem first, and never hold a secret:
 * callers pass a "what" such as "cannot stat '/workspace/x'" that names the
 * subject, never the key or a body.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

struct code_map {
	const char *code;
	int errnum;
	const char *text;
};

/* errno and explanation per API code (contract §7). */
static const struct code_map codes[] = {
	{ "file_not_found", ENOENT, "no such file or directory" },
	{ "file_exists", EEXIST, "file exists" },
	{ "directory_not_empty", ENOTEMPTY, "directory not empty" },
	{ "not_directory", ENOTDIR, "not a directory" },
	{ "file_access_denied", EACCES, "permission denied in the sandbox" },
	{ "unsupported_file_name", EILSEQ, "a file name or link target is not valid UTF-8" },
	{ "not_regular_file", EISDIR, "not a regular file" },
	{ "file_too_large", EFBIG, "file larger than 1 MiB" },
	{ "directory_too_large", E2BIG, "directory listing too large" },
	{ "symlink_not_allowed", EPERM, "operation not allowed on a symbolic link" },
	{ "invalid_file_path", EINVAL, "invalid path" },
	{ "invalid_request", EINVAL, "request rejected as invalid" },
	{ "invalid_container_id", EINVAL, "invalid container id or query" },
	{ "invalid_generation", EINVAL, "invalid container generation" },
	{ "invalid_cursor", EINVAL, "invalid event cursor" },
	{ "invalid_idempotency_key", EINVAL, "invalid idempotency key" },
	{ "invalid_size", EINVAL, "invalid container size" },
	{ "invalid_internet_policy", EINVAL, "invalid internet policy" },
	{ "container_id_required", EINVAL, "a container id is required" },
	{ "request_too_large", E2BIG, "request too large" },
	{ "method_not_allowed", EOPNOTSUPP, "method not allowed" },
	{ "container_not_running", ENOTCONN, "container is not running (stopped, expired or replaced)" },
	{ "not_authenticated", EACCES, "the API key was rejected" },
	{ "subscription_required", EACCES, "no paid subscription" },
	{ "origin_not_allowed", EACCES, "origin not allowed" },
	{ "origin_required", EACCES, "origin or authorization required" },
	{ "execution_limit", EAGAIN, "too many operations in flight on the container" },
	{ "execution_history_limit", EUSERS, "too many retained executions on the container" },
	{ "execution_stream_limit", EMFILE, "too many event streams open on the container" },
	{ "execution_not_found", ENOENT, "no such execution (unknown or expired)" },
	{ "not_found", ENOENT, "not found" },
	{ "execution_not_running", ESRCH, "execution is not running" },
	{ "idempotency_key_conflict", EEXIST, "idempotency key reused with different options" },
	{ "creation_no_longer_running", ESTALE, "the sandbox stopped while starting: its image failed to boot, or it was stopped or replaced before it was ready" },
	{ "stdin_closed", EPIPE, "execution input is closed" },
	{ "stdin_limit", EAGAIN, "execution input limit reached" },
	{ "stdin_too_large", EMSGSIZE, "input chunk larger than 64 KiB" },
	{ "stdin_unavailable", EAGAIN, "input write not confirmed" },
	{ "pty_unavailable", ENOTTY, "execution has no terminal" },
	{ "image_not_found", ENOENT, "no such image" },
	{ "image_not_ready", EBUSY, "image not ready" },
	{ "image_not_available", EBUSY, "image not available" },
	{ "container_limit_exceeded", EBUSY, "container limit reached" },
	{ "compute_capacity_exceeded", EBUSY, "compute capacity reached" },
	{ "container_quota_exceeded", EDQUOT, "monthly container starts exhausted" },
	{ "compute_allowance_exhausted", EDQUOT, "monthly compute allowance exhausted" },
	{ "workspace_expired", ENOENT, "workspace expired" },
	{ "workspace_export_too_large", EFBIG, "workspace archive larger than 16 MiB" },
	{ "containers_unavailable", EAGAIN, "the container service is unavailable" },
	{ "execution_unavailable", EAGAIN, "the execution service is unavailable" },
	{ "files_unavailable", EAGAIN, "the file service is unavailable" },
	{ "billing_unavailable", EAGAIN, "the billing service is unavailable" },
	{ "workspace_export_unavailable", EAGAIN, "workspace export is unavailable" },
	{ "network_policy_unavailable", EOPNOTSUPP, "network policy not available" },
	{ "persistence_unavailable", EOPNOTSUPP, "persistence not available" },
	{ "request_failed", EIO, "request failed" },
};

static const struct code_map *lookup(const char *code)
{
	size_t i;

	if (!code || !*code)
		return NULL;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(codes[i].code, code) == 0)
			return &codes[i];
	return NULL;
}

static int is_mutation(enum mb_op op)
{
	switch (op) {
	case MB_OP_FILE_PUT: case MB_OP_MKDIR: case MB_OP_REMOVE:
	case MB_OP_MOVE: case MB_OP_CHMOD: case MB_OP_EXEC:
		return 1;
	default:
		return 0;
	}
}

void mb_err_clear(struct mb_err *e)
{
	if (!e)
		return;
	memset(e, 0, sizeof(*e));
}

int mb_err_set(struct mb_err *e, int errnum, const char *fmt, ...)
{
	va_list ap;

	if (errnum <= 0)
		errnum = EIO;
	if (e) {
		mb_err_clear(e);
		e->errnum = errnum;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -errnum;
}

int mb_err_errno_for(enum mb_op op, int http_status, const char *code)
{
	const struct code_map *m = lookup(code);

	if (!m)
		return EIO;
	/* Per-operation exceptions go here. The contract needs none today:
	 * not_regular_file is EISDIR for GET and for a PUT onto a directory or
	 * a symlink alike, and 503 *_unavailable stays EAGAIN for mutations
	 * too (mb_err_api() marks those ambiguous). */
	(void)op;
	(void)http_status;
	return m->errnum;
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "bad request";
	case 401: return "not authenticated";
	case 402: return "payment required";
	case 403: return "forbidden";
	case 404: return "not found";
	case 405: return "method not allowed";
	case 409: return "conflict";
	case 410: return "gone";
	case 413: return "too large";
	case 429: return "too many requests";
	case 500: return "server error";
	case 502: return "bad gateway";
	case 503: return "service unavailable";
	case 504: return "gateway timeout";
	default: return "unexpected answer";
	}
}

int mb_err_api(struct mb_err *e, enum mb_op op, int http_status,
	       const char *code, const char *what)
{
	const struct code_map *m = lookup(code);
	int errnum = mb_err_errno_for(op, http_status, code);
	const char *text = m ? m->text : status_text(http_status);

	if (!what || !*what)
		what = "request failed";
	if (code && *code)
		mb_err_set(e, errnum, "%s: %s (HTTP %d %s)", what, text,
			   http_status, code);
	else
		mb_err_set(e, errnum, "%s: %s (HTTP %d)", what, text,
			   http_status);
	if (e) {
		e->http_status = http_status;
		if (code)
			snprintf(e->code, sizeof(e->code), "%s", code);
		/* A 5xx on a mutation: the runtime may have acted before the
		 * answer was lost. Billing is checked before anything runs. */
		if (http_status >= 500 && is_mutation(op) &&
		    !(code && strcmp(code, "billing_unavailable") == 0))
			e->ambiguous = 1;
	}
	return -errnum;
}

int mb_err_is_stopped(const struct mb_err *e)
{
	return e && e->http_status == 409 &&
	       strcmp(e->code, "container_not_running") == 0;
}

int mb_err_is_transient(const struct mb_err *e)
{
	if (!e || mb_err_is_stopped(e))
		return 0;
	if (e->http_status >= 500)
		return 1;
	if (e->http_status == 429)
		return strcmp(e->code, "container_quota_exceeded") != 0 &&
		       strcmp(e->code, "compute_allowance_exhausted") != 0;
	if (e->http_status)
		return 0;
	switch (e->errnum) {
	case ECONNREFUSED: case ECONNRESET: case ECONNABORTED: case ETIMEDOUT:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EPIPE:
	case EAGAIN: case EIO:
		return 1;
	default:
		return e->ambiguous;
	}
}
