/* mux.c: one run's long polls through the mount's socket (see mux.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/agent.h"
#include "common/api.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/exec_int.h"
#include "shim/mux.h"

static int request(const struct mbx_mux_parts *p, unsigned wait_ms, cJSON **out)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddStringToObject(o, "op", "poll") ||
	    !cJSON_AddStringToObject(o, "prelude", p->prelude.data) ||
	    !cJSON_AddStringToObject(o, "setup", p->setup.data) ||
	    !cJSON_AddStringToObject(o, "ready", p->ready.data) ||
	    !cJSON_AddStringToObject(o, "body", p->body.data) ||
	    !cJSON_AddNumberToObject(o, "waitMs", wait_ms)) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}

/* Wait until fd has an answer: 0, -ETIMEDOUT after ms, -ECANCELED once
 * mbexec gave up on the service (mb_api_cancel_all). */
static int wait_answer(int fd, uint64_t ms)
{
	uint64_t end = mb_now_ms() + ms;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	for (;;) {
		if (mb_api_cancelled())
			return -ECANCELED;
		if (mb_now_ms() >= end)
			return -ETIMEDOUT;
		n = poll(&p, 1, 250);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static void lost(int *fd, int e)
{
	mb_log(MB_LOG_DEBUG, "mount socket: %s; polling directly", strerror(-e));
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int mbx_mux_poll(struct mbx_run *r, int *fd, const char *run_id, uint64_t oo,
		 uint64_t eo, long in_pos, unsigned wait_ms,
		 struct mbx_report *rep, struct mb_err *err)
{
	const char *name = r->target->control.agent;
	struct mbx_mux_parts parts;
	cJSON *q = NULL, *a = NULL;
	const cJSON *v;
	int e;

	if (!name[0])
		return -ENOTCONN;
	if (*fd < 0) {
		*fd = mb_agent_connect(name);
		if (*fd < 0) {
			lost(fd, *fd);
			return -ENOTCONN;
		}
	}
	if (mbx_guest_mux_poll(run_id, oo, eo, in_pos, &parts))
		return -ENOTCONN;
	e = request(&parts, wait_ms, &q);
	mbx_mux_parts_release(&parts);
	if (e)
		return -ENOTCONN;
	e = mb_agent_send(*fd, q);
	cJSON_Delete(q);
	/* a mount that does not answer in time (its own request to the
	 * service hangs) is left for this poll: the caller polls directly,
	 * and the next poll connects again */
	if (!e) {
		e = wait_answer(*fd, wait_ms + MBX_MUX_SLACK_MS);
		if (e == -ETIMEDOUT || e == -ECANCELED) {
			lost(fd, e);
			return mb_err_set(err, -e, "no answer from the mount's "
					  "poll in %u ms", wait_ms + MBX_MUX_SLACK_MS);
		}
	}
	if (!e)
		e = mb_agent_recv(*fd, &a);
	if (e) {
		lost(fd, e);
		return -ENOTCONN;
	}
	v = cJSON_GetObjectItemCaseSensitive(a, "out");
	if (cJSON_IsString(v)) {
		e = mbx_report_parse(v->valuestring, strlen(v->valuestring), rep);
		if (e)
			e = mb_err_set(err, EPROTO, "unreadable answer from the "
				       "sandbox through the mount");
	} else {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "errno");
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(a, "httpStatus");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "code");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "error");
		const cJSON *am = cJSON_GetObjectItemCaseSensitive(a, "ambiguous");

		/* an errno the kernel could give, else EIO */
		e = mb_err_set(err, cJSON_IsNumber(n) && n->valueint > 0 &&
			       n->valueint < 4096 ? n->valueint : EIO, "%s",
			       cJSON_IsString(m) ?
			       m->valuestring : "the mount's poll failed");
		err->http_status = cJSON_IsNumber(h) ? h->valueint : 0;
		if (cJSON_IsString(c))
			snprintf(err->code, sizeof(err->code), "%s", c->valuestring);
		err->ambiguous = cJSON_IsTrue(am);
	}
	cJSON_Delete(a);
	return e;
}
