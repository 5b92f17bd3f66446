/* api_core.h (internal to common/): the request runner under api.h.
 *
 * struct mb_client and mb_call_run(), which builds the URL, takes a limiter
 * slot for pool-using requests, performs the exchange (http.h) and applies
 * the retry rules of api.h. The api_*.c files only describe calls and parse
 * answers.
 */
#ifndef MB_API_CORE_H
#define MB_API_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/api.h"
#include "common/http.h"
#include "common/json.h"
#include "common/limiter.h"

struct lim_entry {
	char id[MB_ID_MAX];
	struct mb_limiter *l;
};

struct mb_client {
	char *api_url;
	char *api_key;
	long connect_timeout_ms;
	long op_timeout_ms;
	bool use_limiter;
	bool log_requests;
	pthread_mutex_t lock;       /* protects lims, nlims */
	struct lim_entry *lims;
	size_t nlims;
	_Atomic uint64_t last_renew_ms;  /* mb_client_last_renew_ms() */
};

enum mb_retry {
	MB_RETRY_READ,      /* idempotent: transport errors and 5xx retried */
	MB_RETRY_MUTATION,  /* only 429 execution_limit and unsent requests */
	MB_RETRY_KEYED,     /* same key and body: transport errors and 503 */
};

struct mb_call {
	enum mb_op op;
	const char *what;              /* message prefix: "cannot stat '/x'" */
	const char *method;
	const char *route;             /* "/containers/files/stat" */
	const struct mb_ident *who;    /* adds id (and createdAt if set) */
	const char *const *query;      /* more "key", "value" pairs; NULL end */
	bool pool;                     /* holds a limiter slot while in flight */
	enum mb_retry retry;
	const char *content_type;
	const void *body;
	size_t body_len;
	bool has_body;
	const char *idempotency_key;
	long min_timeout_ms;           /* one attempt may run this long even
	                                  past the call's budget (exec) */
	long budget_ms;                /* 0: the client's op_timeout_ms */
	size_t max_body;               /* 0: 4 MiB */
	mb_http_sink_fn sink;          /* 2xx bodies streamed here */
	void *sink_ud;
	/* Before a retry: undo what the sink did; non-zero forbids the retry
	 * (the sink's output could not be taken back). NULL: always fine. */
	int (*rewind)(void *sink_ud);
	long low_speed_secs;
};

/* Run k. Returns 0 with a 2xx answer in resp (or resp->stopped set by the
 * sink); else -errno with err filled: API errors through mb_err_api(),
 * transport errors as "<what>: <cause>", err->ambiguous per the rules. */
int mb_call_run(struct mb_client *c, const struct mb_call *k,
		struct mb_http_resp *resp, struct mb_err *err);

/* Parse resp's body as a JSON object for k (EPROTO with "<what>: ..."). */
int mb_call_json(const struct mb_call *k, const struct mb_http_resp *resp,
		 cJSON **out, struct mb_err *err);

/* Write "<verb> '<path>'" into out (the usual "what"). */
void mb_call_what(char *out, size_t size, const char *verb, const char *path);

#define MB_WHAT_MAX 320
/* A call still retrying after this long says so once (log level WARN). */
#define MB_WAIT_NOTICE_MS 5000

/* Parse an execution summary (contract §5.2). */
int mb_job_parse(const cJSON *o, struct mb_job *out, const char *what,
		 struct mb_err *err);

/* "/containers/executions/<eid><suffix>" into out; -EINVAL for an id that
 * is not UUID-shaped. */
int mb_job_route(char *out, size_t size, const char *eid, const char *suffix,
		 struct mb_err *err);

#endif
