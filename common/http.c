/* http.c: one HTTP exchange over libcurl with a per-thread handle cache. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "common/http.h"
#include "common/ident.h"

/* Set once by mb_http_cancel_all(); never cleared. */
static atomic_bool cancelled;

void mb_http_cancel_all(void)
{
	atomic_store(&cancelled, true);
}

bool mb_http_cancelled(void)
{
	return atomic_load(&cancelled);
}

/* libcurl calls this about once a second even when nothing moves. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	(void)ud, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return atomic_load(&cancelled) ? 1 : 0;
}

static pthread_key_t handle_key;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

static void handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void handle_key_init(void)
{
	pthread_key_create(&handle_key, handle_free);
}

/* 1 while this thread's handle is inside curl_easy_perform: a request made
 * from a callback (e.g. an SSE event handler) then gets its own handle. */
static __thread int handle_busy;

/* The calling thread's handle, reset to defaults but keeping its
 * connection cache; a fresh one (*temp = true, caller cleans up) when the
 * thread's handle is already in use further up the stack. */
static CURL *thread_handle(bool *temp)
{
	CURL *h;

	*temp = false;
	if (handle_busy) {
		*temp = true;
		return curl_easy_init();
	}
	pthread_once(&handle_once, handle_key_init);
	h = pthread_getspecific(handle_key);
	if (h) {
		curl_easy_reset(h);
		return h;
	}
	h = curl_easy_init();
	if (h && pthread_setspecific(handle_key, h) != 0) {
		curl_easy_cleanup(h);
		return NULL;
	}
	return h;
}

void mb_http_thread_cleanup(void)
{
	CURL *h;

	pthread_once(&handle_once, handle_key_init);
	h = pthread_getspecific(handle_key);
	if (h) {
		pthread_setspecific(handle_key, NULL);
		curl_easy_cleanup(h);
	}
}

int mb_http_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void mb_http_global_cleanup(void)
{
	mb_http_thread_cleanup();
	curl_global_cleanup();
}

void mb_http_resp_init(struct mb_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	mb_buf_init(&r->body, MB_BUF_UNLIMITED);
}

void mb_http_resp_release(struct mb_http_resp *r)
{
	mb_buf_release(&r->body);
	r->status = 0;
	r->stopped = 0;
	r->sent = false;
}

int mb_http_append_escaped(struct mb_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int r = 0;

	for (; !r && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
		    c == '~') {
			r = mb_buf_append(b, s, 1);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			r = mb_buf_append(b, e, 3);
		}
	}
	return r;
}

struct xfer {
	CURL *h;
	const struct mb_http_req *q;
	struct mb_http_resp *resp;
	int mode;            /* 0 undecided, 1 sink, 2 buffer */
	bool too_big;
	bool nomem;
};

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	int r;

	if (!x->mode) {
		long code = 0;

		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
		x->mode = (x->q->sink && code >= 200 && code < 300) ? 1 : 2;
	}
	if (x->mode == 1) {
		r = x->q->sink(p, n, x->q->sink_ud);
		if (r) {
			x->resp->stopped = r;
			return 0;
		}
		return n;
	}
	r = mb_buf_append(&x->resp->body, p, n);
	if (r == -E2BIG) {
		x->too_big = true;
		return 0;
	}
	if (r) {
		x->nomem = true;
		return 0;
	}
	return n;
}

/* scheme://host[:port] of url: what a failure to connect is about. */
static void origin_of(const char *url, char out[256])
{
	const char *p = strstr(url, "://");
	size_t n = p ? (size_t)(p + 3 - url) + strcspn(p + 3, "/?#") : strcspn(url, "?");

	if (n > 255)
		n = 255;
	memcpy(out, url, n);
	out[n] = '\0';
}

/* Failures that end a transfer before its request is sent: connecting,
 * and the TLS handshake (curl sends no early data), which includes
 * checking the server's certificate. */
static bool is_unsent(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_OUT_OF_MEMORY:
		return true;
	default:
		return false;
	}
}

/* "cannot reach 'https://host': Could not resolve host": the service's
 * address and libcurl's own words, so that a DNS or network fault reads
 * as one and not as a timeout. */
static int transport_error(CURLcode rc, long os_errno, const char *url,
			   const char *detail, struct mb_err *err)
{
	char origin[256];

	origin_of(url, origin);
	switch (rc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		/* a proxy, a wrong host name or a broken CA store: no retry
		 * mends it, and nothing was sent (see is_unsent) */
		return mb_err_set(err, EPROTO, "cannot reach '%s': its TLS "
				  "certificate is not accepted (%s)", origin,
				  detail[0] ? detail : curl_easy_strerror(rc));
	case CURLE_COULDNT_CONNECT:
		if (os_errno == ECONNREFUSED || os_errno == 0)
			return mb_err_set(err, ECONNREFUSED, "cannot reach '%s': "
					  "connection refused", origin);
		return mb_err_set(err, (int)os_errno, "cannot reach '%s': %s",
				  origin, strerror((int)os_errno));
	case CURLE_COULDNT_RESOLVE_HOST:
		return mb_err_set(err, EHOSTUNREACH, "cannot reach '%s': Could "
				  "not resolve host", origin);
	case CURLE_COULDNT_RESOLVE_PROXY:
		return mb_err_set(err, EHOSTUNREACH, "cannot reach '%s': Could "
				  "not resolve the proxy", origin);
	case CURLE_OPERATION_TIMEDOUT:
		return mb_err_set(err, ETIMEDOUT, "request to '%s' timed out", url);
	case CURLE_OUT_OF_MEMORY:
		return mb_err_set(err, ENOMEM, "out of memory");
	default:
		return mb_err_set(err, EIO, "request to '%s' failed: %s", url,
				  curl_easy_strerror(rc));
	}
}

/* The URL without its query, for messages. */
static void url_for_msg(const char *url, char out[256])
{
	size_t n = strcspn(url, "?");

	if (n > 255)
		n = 255;
	memcpy(out, url, n);
	out[n] = '\0';
}

int mb_http_perform(const struct mb_http_req *q, struct mb_http_resp *resp,
		    struct mb_err *err)
{
	struct curl_slist *hdrs = NULL, *t;
	struct mb_buf line;
	struct xfer x;
	bool body;
	char where[256];
	char errbuf[CURL_ERROR_SIZE];
	curl_off_t pre = 0;
	long code = 0, os_errno = 0;
	CURLcode rc;
	CURL *h;
	bool temp;
	int r = 0;

	mb_http_resp_release(resp);
	resp->body.max = q->max_body ? q->max_body : MB_BUF_UNLIMITED;
	url_for_msg(q->url, where);
	if (mb_http_cancelled())
		return mb_err_set(err, ECANCELED, "request to '%s' cancelled", where);
	mb_buf_init(&line, 4096);
	h = thread_handle(&temp);
	if (!h)
		return mb_err_set(err, ENOMEM, "cannot create an HTTP handle");
	memset(&x, 0, sizeof(x));
	x.h = h;
	x.q = q;
	x.resp = resp;

	if (q->bearer) {
		if (mb_buf_appendf(&line, "Authorization: Bearer %s", q->bearer))
			goto nomem;
		t = curl_slist_append(hdrs, line.data);
		explicit_bzero(line.data, line.len);
		mb_buf_reset(&line);
		if (!t)
			goto nomem;
		hdrs = t;
	}
	if (q->idempotency_key) {
		if (mb_buf_appendf(&line, "Idempotency-Key: %s", q->idempotency_key) ||
		    !(t = curl_slist_append(hdrs, line.data)))
			goto nomem;
		hdrs = t;
		mb_buf_reset(&line);
	}
	/* a POST, PUT or PATCH always carries a body, if only an empty one */
	body = q->has_body || strcmp(q->method, "POST") == 0 ||
	       strcmp(q->method, "PUT") == 0 || strcmp(q->method, "PATCH") == 0;
	if (body && q->content_type) {
		if (mb_buf_appendf(&line, "Content-Type: %s", q->content_type) ||
		    !(t = curl_slist_append(hdrs, line.data)))
			goto nomem;
		hdrs = t;
	}
	/* no 100-continue round trip: the server reads bodies anyway */
	if (!(t = curl_slist_append(hdrs, "Expect:")))
		goto nomem;
	hdrs = t;

	curl_easy_setopt(h, CURLOPT_URL, q->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_USERAGENT, "mainbrella-c/" MB_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 q->connect_timeout_ms > 0 ? q->connect_timeout_ms : 10000L);
	if (q->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, q->timeout_ms);
	if (q->low_speed_secs > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, q->low_speed_secs);
	}
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(q->body ? q->body_len : 0));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS,
				 q->body && q->body_len ? q->body : "");
	} else {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	if (strcmp(q->method, "GET") != 0 && strcmp(q->method, "POST") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);

	if (!temp)
		handle_busy = 1;
	rc = curl_easy_perform(h);
	if (!temp)
		handle_busy = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pre);
	curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
	resp->status = (int)code;
	/* Nothing left this host only when connecting failed; everything else
	 * (reset, timeout after the request, short answer) may have been
	 * acted on. pre > 0: curl got as far as sending. */
	resp->sent = code > 0 || pre > 0 || !is_unsent(rc);
	if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && resp->stopped))
		goto out;
	if (x.too_big)
		r = mb_err_set(err, EFBIG, "answer from '%s' larger than %zu bytes",
			       where, q->max_body);
	else if (x.nomem)
		r = mb_err_set(err, ENOMEM, "out of memory");
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
		r = mb_err_set(err, ECANCELED, "request to '%s' cancelled", where);
	else
		r = transport_error(rc, os_errno, where, errbuf, err);
	goto out;
nomem:
	r = mb_err_set(err, ENOMEM, "out of memory");
out:
	/* the handle must not keep pointers to our header list or buffer */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	for (t = hdrs; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(hdrs);
	if (temp)
		curl_easy_cleanup(h);
	if (line.data)
		explicit_bzero(line.data, line.len);
	mb_buf_release(&line);
	return r;
}
