/* api_containers.c: GET, POST and DELETE /containers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"
#include "common/util.h"

/* An optional field shown to people only: cut to fit rather than refuse
 * the whole list; anything but a string is left out. */
static void display(const cJSON *o, const char *key, char *dst, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v) || !v->valuestring)
		return;
	size_t len = strlen(v->valuestring);
	snprintf(dst, size, "%s", v->valuestring);
	if (len < size)
		return;
	/* never end in the middle of a UTF-8 sequence */
	len = size - 1;
	size_t start = len;
	while (start > 0 && ((unsigned char)dst[start - 1] & 0xC0) == 0x80)
		start--;
	if (start > 0 && (unsigned char)dst[start - 1] >= 0xC0)
		dst[start - 1] = '\0';
}

static int parse_container(const cJSON *o, struct mb_container *out,
			   const char *what, struct mb_err *err)
{
	struct mb_container ct;
	int r;

	memset(&ct, 0, sizeof(ct));
	if (!cJSON_IsObject(o))
		return mb_err_set(err, EPROTO, "%s: container entry is not an object", what);
	if ((r = mb_json_get_strbuf(o, "id", true, ct.id, sizeof(ct.id), what, err)) ||
	    (r = mb_json_get_strbuf(o, "createdAt", true, ct.created_at,
				    sizeof(ct.created_at), what, err)) ||
	    (r = mb_json_get_strbuf(o, "status", true, ct.status, sizeof(ct.status), what, err)) ||
	    (r = mb_json_get_strbuf(o, "expiresAt", false, ct.expires_at,
				    sizeof(ct.expires_at), what, err)) ||
	    (r = mb_json_get_strbuf(o, "size", false, ct.size, sizeof(ct.size), what, err)))
		return r;
	display(o, "catalogId", ct.catalog_id, sizeof(ct.catalog_id));
	display(o, "imageId", ct.image_id, sizeof(ct.image_id));
	display(o, "imageName", ct.image_name, sizeof(ct.image_name));
	*out = ct;
	return 0;
}

int mb_containers_list(struct mb_client *c, struct mb_container **out,
		       size_t *n, struct mb_err *err)
{
	struct mb_call k = {
		.op = MB_OP_CONTAINERS, .what = "cannot list containers",
		.method = "GET", .route = "/containers", .retry = MB_RETRY_READ,
	};
	struct mb_container *v = NULL;
	struct mb_http_resp resp;
	const cJSON *arr = NULL, *limits = NULL, *it;
	long long idle_ms = 0;
	cJSON *doc = NULL;
	size_t cnt, i = 0;
	int r;

	mb_http_resp_init(&resp);
	r = mb_call_run(c, &k, &resp, err);
	if (r)
		goto out;
	if ((r = mb_call_json(&k, &resp, &doc, err)) ||
	    (r = mb_json_get_arr(doc, "containers", true, &arr, k.what, err)))
		goto out;
	/* advisory (keep-alive pacing): an odd value is ignored, not fatal */
	limits = cJSON_GetObjectItemCaseSensitive(doc, "limits");
	it = cJSON_IsObject(limits)
		? cJSON_GetObjectItemCaseSensitive(limits, "idleTimeoutMs") : NULL;
	if (cJSON_IsNumber(it) && it->valuedouble >= 1 && it->valuedouble < 1e15)
		idle_ms = (long long)it->valuedouble;
	cnt = (size_t)cJSON_GetArraySize(arr);
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(it, arr) {
		r = parse_container(it, &v[i], k.what, err);
		if (r)
			goto out;
		v[i++].idle_timeout_ms = idle_ms;
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

int mb_container_find(struct mb_client *c, const char *id,
		      struct mb_container *out, struct mb_err *err)
{
	struct mb_container *v = NULL;
	size_t n = 0, i;
	int r;

	r = mb_containers_list(c, &v, &n, err);
	if (r)
		return r;
	r = mb_err_set(err, ENOENT, "container '%s' is not running", id);
	for (i = 0; i < n; i++) {
		if (strcmp(v[i].id, id) == 0) {
			*out = v[i];
			mb_err_clear(err);
			r = 0;
			break;
		}
	}
	free(v);
	return r;
}

int mb_container_expires_at(struct mb_client *c, const struct mb_ident *who,
			    char out[MB_GEN_MAX], time_t *sec,
			    struct mb_err *err)
{
	struct mb_container ct;
	time_t t;
	int msec, r;

	r = mb_container_find(c, who->id, &ct, err);
	if (r == 0 && strcmp(ct.created_at, who->created_at) != 0)
		r = -ENOENT;
	if (r == -ENOENT)
		return mb_err_set(err, ENOENT, "container '%s' generation %s is "
				  "not running", who->id, who->created_at);
	if (r)
		return r;
	if (!ct.expires_at[0] || mb_parse_iso8601(ct.expires_at, &t, &msec))
		return mb_err_set(err, EPROTO, "container '%s' generation %s: "
				  "no usable expiresAt in the container list",
				  who->id, who->created_at);
	memcpy(out, ct.expires_at, MB_GEN_MAX);
	if (sec)
		*sec = t;
	return 0;
}

static int parse_creation(const cJSON *doc, struct mb_creation *out,
			  const char *what, struct mb_err *err)
{
	const cJSON *cr = NULL;
	struct mb_creation cn;
	int r;

	memset(&cn, 0, sizeof(cn));
	if ((r = mb_json_get_obj(doc, "creation", true, &cr, what, err)) ||
	    (r = mb_json_get_strbuf(cr, "id", false, cn.creation_id,
				    sizeof(cn.creation_id), what, err)) ||
	    (r = mb_json_get_strbuf(cr, "containerId", false, cn.container_id,
				    sizeof(cn.container_id), what, err)) ||
	    (r = mb_json_get_strbuf(cr, "createdAt", false, cn.created_at,
				    sizeof(cn.created_at), what, err)) ||
	    (r = mb_json_get_strbuf(cr, "status", true, cn.status,
				    sizeof(cn.status), what, err)))
		return r;
	*out = cn;
	return 0;
}

/* Transport errors, 5xx, a 429 that is not a monthly quota and a
 * "starting" creation give -EAGAIN; for the latter *out is filled too, so
 * the caller can show progress. */
int mb_container_create(struct mb_client *c, const struct mb_create_req *req,
			struct mb_creation *out, struct mb_err *err)
{
	struct mb_call k = {
		.op = MB_OP_CONTAINERS, .what = "cannot create a container",
		.method = "POST", .route = "/containers",
		.retry = MB_RETRY_MUTATION, .content_type = "application/json",
		.has_body = true, .budget_ms = 130000,
	};
	struct mb_http_resp resp;
	struct mb_creation cn;
	char key[33], *body = NULL;
	cJSON *o = NULL, *doc = NULL;
	int r;

	mb_http_resp_init(&resp);
	o = cJSON_CreateObject();
	if (!o || (req->catalog_id && !cJSON_AddStringToObject(o, "catalogId", req->catalog_id)) ||
	    (req->size && !cJSON_AddStringToObject(o, "size", req->size)) ||
	    !(body = cJSON_PrintUnformatted(o))) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	k.body = body;
	k.body_len = strlen(body);
	k.idempotency_key = req->idempotency_key;
	if (!k.idempotency_key) {
		if ((r = mb_random_hex(key, 16)) != 0) {
			r = mb_err_set(err, -r, "cannot make an idempotency key");
			goto out;
		}
		k.idempotency_key = key;
	}
	r = mb_call_run(c, &k, &resp, err);
	if (r) {
		if (resp.status == 409 && err && strcmp(err->code, "creation_no_longer_running") == 0) {
			struct mb_err e2;

			mb_err_clear(&e2);
			if (mb_json_parse(resp.body.data, resp.body.len, &doc, k.what, &e2) == 0 &&
			    parse_creation(doc, &cn, k.what, &e2) == 0)
				*out = cn;
			r = -ESTALE;
			err->errnum = ESTALE;
		} else if (err && r != -ENOMEM && mb_err_is_transient(err)) {
			/* a 5xx or a lost answer may come after the service
			 * started the container: only the same key can tell */
			err->errnum = EAGAIN;
			r = -EAGAIN;
		}
		goto out;
	}
	if ((r = mb_call_json(&k, &resp, &doc, err)) ||
	    (r = parse_creation(doc, &cn, k.what, err)))
		goto out;
	if (strcmp(cn.status, "running") != 0) {
		*out = cn;
		r = mb_err_set(err, EAGAIN, "container %s is still %s", cn.container_id, cn.status);
		if (err)   /* an answer: the creation is known to the service */
			err->http_status = resp.status;
		goto out;
	}
	*out = cn;
out:
	cJSON_Delete(doc);
	cJSON_Delete(o);
	free(body);
	mb_http_resp_release(&resp);
	return r;
}

int mb_container_delete(struct mb_client *c, const struct mb_ident *who,
			struct mb_err *err)
{
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_CONTAINERS, .what = what, .method = "DELETE",
		.route = "/containers", .who = who, .retry = MB_RETRY_MUTATION,
	};
	struct mb_http_resp resp;
	int r;

	snprintf(what, sizeof(what), "cannot stop container %s@%s", who->id,
		 who->created_at);
	mb_http_resp_init(&resp);
	r = mb_call_run(c, &k, &resp, err);
	mb_http_resp_release(&resp);
	return r;
}
