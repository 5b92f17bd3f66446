/* http.h (internal to common/): one HTTP exchange over libcurl.
 *
 * Knows nothing of routes, JSON or retries (api_core.c does). Each thread
 * keeps one curl easy handle (a pthread key) so connections are reused;
 * CURLOPT_NOSIGNAL is set, redirects are never followed, no Origin header is
 * ever sent and headers are never logged. Thread-safe.
 */
#ifndef MB_HTTP_H
#define MB_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/err.h"

/* Receives a 2xx body as it arrives; return 0 to go on, any other value
 * aborts the transfer (it is reported in resp->stopped). */
typedef int (*mb_http_sink_fn)(const char *p, size_t n, void *ud);

struct mb_http_req {
	const char *method;          /* "GET", "PUT", "POST", "PATCH", "DELETE" */
	const char *url;             /* full URL, query already encoded */
	const char *bearer;          /* API key or NULL; borrowed */
	const char *content_type;    /* with a body */
	const void *body;            /* borrowed */
	size_t body_len;
	bool has_body;               /* send body (may be empty) */
	const char *idempotency_key; /* NULL: none */
	long connect_timeout_ms;
	long timeout_ms;             /* whole exchange; 0: none */
	long low_speed_secs;         /* abort after this long under 1 B/s; 0: off */
	size_t max_body;             /* cap on a buffered body */
	mb_http_sink_fn sink;        /* NULL: buffer every body */
	void *sink_ud;
};

struct mb_http_resp {
	int status;          /* HTTP status, 0 when none was read */
	struct mb_buf body;  /* the buffered body (always for non-2xx) */
	int stopped;         /* the sink's non-zero value, else 0 */
	bool sent;           /* the request may have reached the server */
};

void mb_http_resp_init(struct mb_http_resp *r);
void mb_http_resp_release(struct mb_http_resp *r);

/* Perform q. Returns 0 when a whole answer was read (any status) or when the
 * sink stopped it; -errno on transport failure: ECONNREFUSED, EHOSTUNREACH
 * (DNS), EPROTO (the server's TLS certificate not accepted), ETIMEDOUT,
 * EFBIG (buffered body over max_body), ENOMEM, else EIO, with a message
 * such as "cannot reach 'http://h:1': connection refused" (no "what"
 * prefix). resp->status
 * and resp->sent are meaningful in both cases. */
int mb_http_perform(const struct mb_http_req *q, struct mb_http_resp *resp,
		    struct mb_err *err);

/* Make every transfer of the process end now, and every later one fail at
 * once, with -ECANCELED ("request to ... cancelled"): for a program that
 * gives up on the service and is about to exit. There is no undo. Any
 * thread. */
void mb_http_cancel_all(void);
bool mb_http_cancelled(void);

/* Append s percent-encoded (everything outside A-Z a-z 0-9 - . _ ~). */
int mb_http_append_escaped(struct mb_buf *b, const char *s);

/* curl_global_init / cleanup; cleanup also frees the calling thread's handle. */
int mb_http_global_init(void);
void mb_http_global_cleanup(void);

/* Free the calling thread's cached handle (threads that end free theirs). */
void mb_http_thread_cleanup(void);

#endif
