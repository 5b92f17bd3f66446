/* err.h: the one error channel of common/.
 *
 * Every common/ function that can fail returns 0 or -errno and, on failure,
 * fills a caller-provided struct mb_err: errno, HTTP status (0 when no HTTP
 * answer was read), the API error code ("" when none) and a human message.
 * The message never holds a credential, a request body or file contents.
 * The API-code-to-errno table lives in err.c and nowhere else.
 */
#ifndef MB_ERR_H
#define MB_ERR_H

#include <stddef.h>

struct mb_err {
	int errnum;        /* positive errno, e.g. ENOENT */
	int http_status;   /* 0 when the request never got an HTTP answer */
	char code[80];     /* API error code ("file_not_found"), "" if none */
	char msg[512];     /* lowercase, problem first, no secrets */
	int ambiguous;     /* 1 when a mutation may or may not have happened
	                      (transport fault after sending, 503 *_unavailable) */
};

/* The operation kinds whose errno mapping differs for one API code. */
enum mb_op {
	MB_OP_OTHER = 0,
	MB_OP_FILE_GET,
	MB_OP_FILE_PUT,
	MB_OP_LIST,
	MB_OP_STAT,
	MB_OP_MKDIR,
	MB_OP_REMOVE,
	MB_OP_MOVE,
	MB_OP_CHMOD,
	MB_OP_EXEC,
	MB_OP_JOB,
	MB_OP_CONTAINERS,
	MB_OP_EXPORT,
};

void mb_err_clear(struct mb_err *e);

/* Fill e with errnum and a printf-style message; returns -errnum. */
int mb_err_set(struct mb_err *e, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Fill e from an API error answer: maps (op, status, code) to an errno with
 * the table in err.c, records status and code, and writes a message of the
 * form "<what>: <explanation> (HTTP <status> <code>)". Returns -errno. */
int mb_err_api(struct mb_err *e, enum mb_op op, int http_status,
	       const char *code, const char *what);

/* The errno the table maps (op, code) to; EIO for unknown codes. */
int mb_err_errno_for(enum mb_op op, int http_status, const char *code);

/* 1 when e says the container generation is gone (409 container_not_running). */
int mb_err_is_stopped(const struct mb_err *e);

/* 1 when repeating the operation may succeed: no answer was read (a
 * transport fault or a timeout), a 5xx, or a 429 other than a monthly quota.
 * Not a stopped generation, another 4xx, or a local error (ENOMEM, ENOSPC,
 * EFBIG, ENAMETOOLONG). Callers still reconcile an ambiguous mutation
 * before repeating it (contract §7.1). */
int mb_err_is_transient(const struct mb_err *e);

#endif
