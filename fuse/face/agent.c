/* agent.c: the mount's socket for mbexec, and its multiplexer of polls (see agent.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/agent.h"
#include "common/buf.h"
#include "common/log.h"
#include "fuse/face/agent.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"

/* At most this many polls go in one exec; each adds ~250 bytes of script
 * and shares the report budget below. */
#define MUX_MAX 40
/* Raw output bytes all the reports of one exec may carry: base64 of it
 * and the headers stay under the 1 MiB output cap of an exec. */
#define MUX_REPORT_BUDGET (600u * 1024)
/* The guest's wait blocks and wakes on any run's news, and on a nudge: a
 * request that arrives while a poll waits appends to that poll's file
 * MUX_NUDGE_FMT (token: pid-batch) so that the poll ends and the next one
 * takes it in. The directory is mbexec's run base (shim/guest.h). */
#define MUX_WAIT_MAX_MS 15000u
#define MUX_TIMEOUT_MS 30000L
#define MUX_NUDGE_DIR "/tmp/.mbexec"
#define MUX_NUDGE_FMT MUX_NUDGE_DIR "/.n.%ld-%lu"
/* After a batch of several, the next one waits this long for its clients. */
#define MUX_GATHER_MS 50L
#define MUX_CONNS_MAX 256

struct mux_req {
	struct mux_req *next;
	cJSON *msg;                 /* the request: prelude, setup, ready, body */
	unsigned wait_ms;
	bool done;                  /* protected by agent->mu */
	char *out;                  /* the answer: this client's report */
	int rc;
	struct mb_err err;
};

struct mbfs_agent {
	struct mbfs *fs;
	int lfd;
	uid_t uid;                  /* the only uid let in */
	pthread_t accept_th, mux_th;
	pthread_mutex_t mu;
	pthread_cond_t work;        /* queue not empty, or stopping */
	pthread_cond_t answered;    /* a request is done, or a conn left */
	/* protected by mu: */
	struct mux_req *head, **tail;
	bool stopping;
	unsigned long batch;        /* the number of the batch in flight */
	bool in_flight, nudged;     /* a batch waits on the guest; it was nudged */
	int conns[MUX_CONNS_MAX];   /* open connection fds, -1 free */
	int nconns;
};

static const char *field(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- one exec for a batch ---- */

/* Build the batch's script: the prelude (the same for all of them), the
 * setups, the wait (mux.sh) for any client's ready test, then every report
 * between markers. */
static int build(struct mux_req **v, size_t n, unsigned wait_ms,
		 unsigned long batch, struct mb_buf *b)
{
	size_t i;
	int r = mb_buf_appendf(b, "%s\n", field(v[0]->msg, "prelude"));

	r = r ? r : mb_buf_appends(b, "mux_ready() {\nfalse");
	for (i = 0; i < n && !r; i++)
		r = mb_buf_appendf(b, " ||\n{ %s\n}", field(v[i]->msg, "ready"));
	r = r ? r : mb_buf_appends(b, "\n}\n");
	for (i = 0; i < n && !r; i++)
		r = mb_buf_appendf(b, "%s\n", field(v[i]->msg, "setup"));
	r = r ? r : mb_buf_appendf(b, "NF=" MUX_NUDGE_FMT "\n", (long)getpid(), batch);
	r = r ? r : mb_buf_appendf(b, "set -- %u.%03u %u\n%s\nMUXCAP=%zu\n",
				   wait_ms / 1000, wait_ms % 1000, 2 * wait_ms / 50 + 1,
				   mbfs_sh_mux, MUX_REPORT_BUDGET / n);
	for (i = 0; i < n && !r; i++)
		r = mb_buf_appendf(b, "echo '@mux %zu'\n%s\n", i, field(v[i]->msg, "body"));
	return r ? r : mb_buf_appends(b, "echo '@mux end'\n");
}

/* Give each request its part of the output: what lies between its marker
 * and the next one (a login profile may print before the first). */
static void split(struct mux_req **v, size_t n, const char *out)
{
	char start[32], end[32];
	size_t i;

	for (i = 0; i < n; i++) {
		const char *s, *e;

		snprintf(start, sizeof(start), "@mux %zu\n", i);
		if (i + 1 < n)
			snprintf(end, sizeof(end), "@mux %zu\n", i + 1);
		else
			snprintf(end, sizeof(end), "@mux end\n");
		s = strstr(out, start);
		e = s ? strstr(s + strlen(start), end) : NULL;
		if (!e) {
			v[i]->rc = mb_err_set(&v[i]->err, EPROTO, "the guest's "
					      "answer to a shared poll was cut");
			continue;
		}
		s += strlen(start);
		v[i]->out = strndup(s, (size_t)(e - s));
		if (!v[i]->out)
			v[i]->rc = mb_err_set(&v[i]->err, ENOMEM, "out of memory");
	}
}

static void run_batch(struct mbfs_agent *a, struct mux_req **v, size_t n,
		      unsigned long batch)
{
	mbfs_reply res;
	unsigned wait_ms = MUX_WAIT_MAX_MS;
	struct mb_err err;
	struct mb_buf b;
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if (v[i]->wait_ms < wait_ms)
			wait_ms = v[i]->wait_ms;
	mb_buf_init(&b, 4u << 20);
	mb_err_clear(&err);
	memset(&res, 0, sizeof(res));
	rc = build(v, n, wait_ms, batch, &b);
	if (rc)
		rc = mb_err_set(&err, -rc, "cannot build a shared poll");
	else
		rc = mbfs_exec(a->fs, b.data, MUX_TIMEOUT_MS, &res, &err);
	if (!rc && (res.timed_out || res.output_truncated))
		rc = mb_err_set(&err, EIO, "a shared poll %s", res.timed_out ?
				"timed out" : "had its output cut");
	if (!rc)
		split(v, n, res.out ? res.out : "");
	else
		for (i = 0; i < n; i++) {
			v[i]->rc = rc;
			v[i]->err = err;
		}
	mbfs_reply_release(&res);
	mb_buf_release(&b);
	mb_log(MB_LOG_DEBUG, "shared poll of %zu command(s): %s", n,
	       rc ? err.msg : "ok");
}

static size_t queued(const struct mbfs_agent *a)
{
	size_t n = 0;

	for (const struct mux_req *q = a->head; q; q = q->next)
		n++;
	return n;
}

static void *mux_main(void *arg)
{
	struct mbfs_agent *a = arg;
	struct mux_req *v[MUX_MAX];
	size_t n, i, last = 0;

	for (;;) {
		pthread_mutex_lock(&a->mu);
		while (!a->head && !a->stopping)
			pthread_cond_wait(&a->work, &a->mu);
		/* the clients of the last batch ask again at once: wait for
		 * them a little, or the first would start a batch that the
		 * others then nudge to an end */
		if (last > 1 && !a->stopping) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += MUX_GATHER_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			while (queued(a) < last && !a->stopping &&
			       pthread_cond_timedwait(&a->work, &a->mu, &ts) == 0)
				;
		}
		if (a->stopping && !a->head) {
			pthread_mutex_unlock(&a->mu);
			return NULL;
		}
		/* one prelude per exec: two mbexec versions define the same
		 * shell functions differently, so they go in turns */
		struct mux_req **pp = &a->head;
		const char *prelude = field(a->head->msg, "prelude");

		n = 0;
		while (*pp && n < MUX_MAX) {
			if (strcmp(field((*pp)->msg, "prelude"), prelude)) {
				pp = &(*pp)->next;
				continue;
			}
			v[n++] = *pp;
			*pp = (*pp)->next;
		}
		a->tail = &a->head;
		while (*a->tail)
			a->tail = &(*a->tail)->next;
		a->batch++;
		a->in_flight = true;
		a->nudged = false;
		unsigned long batch = a->batch;
		pthread_mutex_unlock(&a->mu);

		run_batch(a, v, n, batch);
		last = n;

		pthread_mutex_lock(&a->mu);
		a->in_flight = false;
		for (i = 0; i < n; i++)
			v[i]->done = true;
		pthread_cond_broadcast(&a->answered);
		pthread_mutex_unlock(&a->mu);
	}
}

/* ---- connections ---- */

static int answer(int fd, const struct mux_req *q)
{
	cJSON *o = cJSON_CreateObject();
	int r = -ENOMEM;

	if (!o)
		return r;
	if (q->rc == 0 && cJSON_AddStringToObject(o, "out", q->out ? q->out : ""))
		r = 0;
	else if (q->rc &&
		 cJSON_AddStringToObject(o, "error", q->err.msg) &&
		 cJSON_AddNumberToObject(o, "errno", q->err.errnum ? q->err.errnum : EIO) &&
		 cJSON_AddNumberToObject(o, "httpStatus", q->err.http_status) &&
		 cJSON_AddStringToObject(o, "code", q->err.code) &&
		 cJSON_AddBoolToObject(o, "ambiguous", q->err.ambiguous))
		r = 0;
	if (!r)
		r = mb_agent_send(fd, o);
	cJSON_Delete(o);
	return r;
}

/* End the wait of the batch in flight (mux.sh's NF), so that the next one
 * takes in a new request at once. A private base only (lib.sh's base_ok). */
static void nudge(struct mbfs_agent *a, unsigned long batch)
{
	mbfs_reply res;
	struct mb_err err;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "B=%s; [ ! -L \"$B\" ] && [ -d \"$B\" ] && "
		 "[ -O \"$B\" ] && echo >>" MUX_NUDGE_FMT, MUX_NUDGE_DIR,
		 (long)getpid(), batch);
	memset(&res, 0, sizeof(res));
	mb_err_clear(&err);
	if (mbfs_exec(a->fs, cmd, 10000L, &res, &err))
		mb_log(MB_LOG_DEBUG, "cannot nudge the shared poll: %s", err.msg);
	mbfs_reply_release(&res);
}

/* Queue one request and wait for its answer. */
static void serve_one(struct mbfs_agent *a, struct mux_req *q)
{
	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		q->rc = mb_err_set(&q->err, ESHUTDOWN, "the mount is stopping");
		q->done = true;
	} else {
		*a->tail = q;
		a->tail = &q->next;
		pthread_cond_signal(&a->work);
		if (a->in_flight && !a->nudged) {
			unsigned long batch = a->batch;

			a->nudged = true;
			pthread_mutex_unlock(&a->mu);
			nudge(a, batch);
			pthread_mutex_lock(&a->mu);
		}
	}
	while (!q->done)
		pthread_cond_wait(&a->answered, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

bool mbfs_agent_active(struct mbfs_agent *a)
{
	if (!a)
		return false;
	pthread_mutex_lock(&a->mu);
	bool active = a->nconns > 0;
	pthread_mutex_unlock(&a->mu);
	return active;
}

struct conn {
	struct mbfs_agent *a;
	int fd;
	int slot;
};

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct mbfs_agent *a = c->a;
	cJSON *msg;

	while (mb_agent_recv(c->fd, &msg) == 0) {
		struct mux_req q;
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(msg, "waitMs");

		memset(&q, 0, sizeof(q));
		mb_err_clear(&q.err);
		q.msg = msg;
		q.wait_ms = cJSON_IsNumber(w) && w->valuedouble >= 0 &&
			    w->valuedouble < MUX_WAIT_MAX_MS ?
			    (unsigned)w->valuedouble : MUX_WAIT_MAX_MS;
		if (strcmp(field(msg, "op"), "poll")) {
			q.rc = mb_err_set(&q.err, EINVAL, "unknown request");
		} else {
			serve_one(a, &q);
		}
		cJSON_Delete(msg);
		msg = NULL;
		int r = answer(c->fd, &q);

		free(q.out);
		if (r)
			break;
	}
	pthread_mutex_lock(&a->mu);
	a->conns[c->slot] = -1;
	a->nconns--;
	pthread_cond_broadcast(&a->answered);
	pthread_mutex_unlock(&a->mu);
	close(c->fd);
	free(c);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct mbfs_agent *a = arg;

	for (;;) {
		int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
		struct conn *c;
		pthread_t th;
		uid_t uid;
		int slot;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;   /* shut down */
		}
		/* the mounting user's own processes only: the mount acts with
		 * its API key for whoever gets in */
		if (mb_agent_peer_uid(fd, &uid) || uid != a->uid) {
			mb_log(MB_LOG_WARN, "agent: refused a connection from "
			       "uid %ld", (long)uid);
			close(fd);
			continue;
		}
		pthread_mutex_lock(&a->mu);
		for (slot = 0; slot < MUX_CONNS_MAX && a->conns[slot] >= 0; slot++)
			;
		c = slot < MUX_CONNS_MAX && !a->stopping ? calloc(1, sizeof(*c)) : NULL;
		if (c) {
			c->a = a;
			c->fd = fd;
			c->slot = slot;
			a->conns[slot] = fd;
			a->nconns++;
		}
		pthread_mutex_unlock(&a->mu);
		if (!c || pthread_create(&th, NULL, conn_main, c)) {
			if (c) {
				pthread_mutex_lock(&a->mu);
				a->conns[slot] = -1;
				a->nconns--;
				pthread_mutex_unlock(&a->mu);
				free(c);
			}
			close(fd);
			continue;
		}
		pthread_detach(th);
	}
}

int mbfs_agent_start(struct mbfs *fs, struct mbfs_agent **out, char *name,
		     unsigned long name_size)
{
	char nm[MB_AGENT_NAME_MAX];
	struct mbfs_agent *a;
	int r, i;

	r = mb_agent_name(nm);
	if (r)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fs = fs;
	a->uid = getuid();
	a->tail = &a->head;
	for (i = 0; i < MUX_CONNS_MAX; i++)
		a->conns[i] = -1;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->work, NULL);
	pthread_cond_init(&a->answered, NULL);
	a->lfd = mb_agent_listen(nm);
	if (a->lfd < 0) {
		r = a->lfd;
		goto fail;
	}
	if (pthread_create(&a->mux_th, NULL, mux_main, a)) {
		r = -EAGAIN;
		goto fail_fd;
	}
	if (pthread_create(&a->accept_th, NULL, accept_main, a)) {
		pthread_mutex_lock(&a->mu);
		a->stopping = true;
		pthread_cond_signal(&a->work);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->mux_th, NULL);
		r = -EAGAIN;
		goto fail_fd;
	}
	snprintf(name, name_size, "%s", nm);
	*out = a;
	return 0;
fail_fd:
	close(a->lfd);
fail:
	pthread_cond_destroy(&a->answered);
	pthread_cond_destroy(&a->work);
	pthread_mutex_destroy(&a->mu);
	free(a);
	return r;
}

void mbfs_agent_stop(struct mbfs_agent *a)
{
	int i;

	if (!a)
		return;
	shutdown(a->lfd, SHUT_RDWR);
	pthread_join(a->accept_th, NULL);
	close(a->lfd);
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	pthread_cond_signal(&a->work);
	for (i = 0; i < MUX_CONNS_MAX; i++)
		if (a->conns[i] >= 0)
			shutdown(a->conns[i], SHUT_RDWR);
	pthread_mutex_unlock(&a->mu);
	/* the mux answers what is queued (the exec in flight ends), then the
	 * connection threads leave */
	pthread_join(a->mux_th, NULL);
	pthread_mutex_lock(&a->mu);
	while (a->nconns > 0)
		pthread_cond_wait(&a->answered, &a->mu);
	pthread_mutex_unlock(&a->mu);
	pthread_cond_destroy(&a->answered);
	pthread_cond_destroy(&a->work);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
