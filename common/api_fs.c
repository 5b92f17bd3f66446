/* api_fs.c: the metadata routes (/containers/files/{list,stat,mkdir,
 * remove,move,chmod}) and the entry JSON of contract §4.5. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api_core.h"
#include "common/log.h"
#include "common/util.h"

/* A 403 on a list page: an entry vanished between the listing and its
 * stat (§9). Commands run as root, so a real refusal is rare; a churning
 * directory can race several times in a row (3 tries let 2 listings in
 * 800 through), so ask up to this often, within op_timeout. */
#define LIST_RACE_TRIES 8
#define LIST_MAX_OFFSET 1000000ul   /* the API's offset window (§4.6) */

void mb_entry_release(struct mb_entry *e)
{
	if (!e)
		return;
	free(e->name);
	free(e->link_target);
	e->name = NULL;
	e->link_target = NULL;
}

void mb_entry_list_release(struct mb_entry_list *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; i < l->n; i++)
		mb_entry_release(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int parse_type(const char *s, enum mb_ftype *out)
{
	static const struct { const char *name; enum mb_ftype t; } types[] = {
		{ "file", MB_FT_FILE }, { "directory", MB_FT_DIR },
		{ "symlink", MB_FT_SYMLINK }, { "fifo", MB_FT_FIFO },
		{ "socket", MB_FT_SOCKET }, { "character", MB_FT_CHAR },
		{ "block", MB_FT_BLOCK }, { "other", MB_FT_OTHER },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(s, types[i].name) == 0) {
			*out = types[i].t;
			return 0;
		}
	}
	/* a type added later still lists as something */
	*out = MB_FT_OTHER;
	return 0;
}

/* "0644", "1777": octal, special bits kept. */
static int parse_mode(const char *s, unsigned *out)
{
	unsigned v = 0;
	size_t n = 0;

	for (; *s; s++, n++) {
		if (*s < '0' || *s > '7' || n >= 6)
			return -1;
		v = v * 8 + (unsigned)(*s - '0');
	}
	if (!n)
		return -1;
	*out = v & 07777;
	return 0;
}

/* One entry of §4.5. keepnul: the tree was parsed with
 * mb_json_parse_keepnul(), so a name's NUL bytes can be seen (name_cut). */
static int parse_entry(const cJSON *o, bool keepnul, struct mb_entry *out,
		       const char *what, struct mb_err *err)
{
	const char *name = NULL, *type = NULL, *mode = NULL, *mtime = NULL,
		   *target = NULL;
	long long size = 0, uid = 0, gid = 0;
	struct mb_entry e;
	int r, msec;

	memset(&e, 0, sizeof(e));
	if (!cJSON_IsObject(o))
		return mb_err_set(err, EPROTO, "%s: entry is not an object", what);
	if ((r = mb_json_get_str(o, "name", true, &name, what, err)) ||
	    (r = mb_json_get_str(o, "type", true, &type, what, err)) ||
	    (r = mb_json_get_int(o, "size", false, &size, NULL, what, err)) ||
	    (r = mb_json_get_str(o, "mode", true, &mode, what, err)) ||
	    (r = mb_json_get_int(o, "uid", false, &uid, NULL, what, err)) ||
	    (r = mb_json_get_int(o, "gid", false, &gid, NULL, what, err)) ||
	    (r = mb_json_get_str(o, "modifiedAt", false, &mtime, what, err)) ||
	    (r = mb_json_get_str(o, "linkTarget", false, &target, what, err)))
		return r;
	parse_type(type, &e.type);
	if (parse_mode(mode, &e.mode))
		return mb_err_set(err, EPROTO, "%s: field 'mode' is not an octal mode ('%.16s')",
				  what, mode);
	if (size < 0 || uid < 0 || gid < 0 || uid > 0xffffffffll || gid > 0xffffffffll)
		return mb_err_set(err, EPROTO, "%s: negative or huge size, uid or gid", what);
	if (mtime && mb_parse_iso8601(mtime, &e.mtime, &msec))
		return mb_err_set(err, EPROTO, "%s: field 'modifiedAt' is not an ISO time", what);
	e.size = (uint64_t)size;
	e.uid = (unsigned)uid;
	e.gid = (unsigned)gid;
	if (keepnul) {
		size_t n = 0;
		if ((r = mb_json_get_bytes(o, "name", true, &e.name, &n, what, err)))
			return r;
		e.name_cut = memchr(e.name, '\0', n) != NULL;
		/* a target is still cut at its first NUL, as cJSON cuts it */
		if (e.type == MB_FT_SYMLINK && target &&
		    (r = mb_json_get_bytes(o, "linkTarget", false, &e.link_target,
					   &n, what, err))) {
			mb_entry_release(&e);
			return r;
		}
	} else {
		e.name = strdup(name);
	}
	if (e.type == MB_FT_SYMLINK && !e.link_target)
		e.link_target = strdup(target ? target : "");
	if (!e.name || (e.type == MB_FT_SYMLINK && !e.link_target)) {
		mb_entry_release(&e);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	*out = e;
	return 0;
}

/* A list page's JSON into *doc. A page holding a \u0000 escape is parsed
 * so that the NUL stays visible to parse_entry (*keepnul): cJSON would cut
 * the name there and show its prefix. */
static int parse_page(const struct mb_call *k, const struct mb_http_resp *resp,
		      cJSON **doc, bool *keepnul, struct mb_err *err)
{
	*keepnul = mb_json_count_nuls(resp->body.data, resp->body.len) > 0;
	if (*keepnul)
		return mb_json_parse_keepnul(resp->body.data, resp->body.len,
					     doc, k->what, err);
	return mb_call_json(k, resp, doc, err);
}

static int list_page(struct mb_client *c, const struct mb_ident *who,
		     const char *path, unsigned limit, unsigned long offset,
		     struct mb_entry_list *out, long *next_offset,
		     struct mb_err *err)
{
	char lim[16], off[24], what[MB_WHAT_MAX];
	const char *query[] = { "path", path, "limit", lim, "offset", off, NULL };
	struct mb_call k = {
		.op = MB_OP_LIST, .what = what, .method = "GET",
		.route = "/containers/files/list", .who = who, .query = query,
		.pool = true, .retry = MB_RETRY_READ,
		.max_body = (2u << 20),
	};
	struct mb_entry_list l = { NULL, 0 };
	struct mb_http_resp resp;
	const cJSON *arr = NULL, *it;
	long long next = -1;
	bool has_next = false, nuls = false;
	cJSON *doc = NULL;
	size_t cnt;
	int r;

	mb_call_what(what, sizeof(what), "cannot list", path);
	if (limit < 1 || limit > MB_MAX_LIST_ENTRIES)
		return mb_err_set(err, EINVAL, "%s: page size %u out of 1..1000", what, limit);
	snprintf(lim, sizeof(lim), "%u", limit);
	snprintf(off, sizeof(off), "%lu", offset);
	mb_http_resp_init(&resp);
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = parse_page(&k, &resp, &doc, &nuls, err)) ||
	    (r = mb_json_get_arr(doc, "entries", true, &arr, what, err)) ||
	    (r = mb_json_get_int(doc, "nextOffset", false, &next, &has_next, what, err)))
		goto out;
	cnt = (size_t)cJSON_GetArraySize(arr);
	l.v = calloc(cnt ? cnt : 1, sizeof(*l.v));
	if (!l.v) {
		r = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(it, arr) {
		r = parse_entry(it, nuls, &l.v[l.n], what, err);
		if (r)
			goto out;
		l.n++;
	}
	if (has_next && next <= (long long)offset) {
		r = mb_err_set(err, EPROTO, "%s: nextOffset does not advance", what);
		goto out;
	}
	*out = l;
	*next_offset = has_next ? (long)next : -1;
	l.v = NULL;
	l.n = 0;
out:
	mb_entry_list_release(&l);
	cJSON_Delete(doc);
	mb_http_resp_release(&resp);
	return r;
}

/* The runtime stats every entry of a page and fails the whole page with
 * 403 when one vanishes meanwhile (contract §9.5): that 403 says nothing
 * about the directory, so ask again a couple of times before believing it. */
int mb_fs_list(struct mb_client *c, const struct mb_ident *who,
	       const char *path, unsigned limit, unsigned long offset,
	       struct mb_entry_list *out, long *next_offset, struct mb_err *err)
{
	struct mb_err e;
	int r;

	for (unsigned t = 0;; t++) {
		mb_err_clear(&e);
		r = list_page(c, who, path, limit, offset, out, next_offset, &e);
		if (!r || e.http_status != 403 ||
		    strcmp(e.code, "file_access_denied") != 0 ||
		    t + 1 >= LIST_RACE_TRIES)
			break;
		mb_log(MB_LOG_DEBUG, "%s: asking again (an entry may have "
		       "vanished while it was listed)", e.msg);
		mb_sleep_ms(mb_backoff_ms(t, 100, 1000));
	}
	if (r && err)
		*err = e;
	return r;
}

int mb_fs_list_all(struct mb_client *c, const struct mb_ident *who,
		   const char *path, struct mb_entry_list *out,
		   struct mb_err *err)
{
	struct mb_entry_list all = { NULL, 0 }, page;
	uint64_t deadline = mb_now_ms() + (uint64_t)c->op_timeout_ms;
	uint64_t outer = mb_op_deadline(0);
	unsigned long offset = 0;
	long next = 0;
	int r = 0;

	/* every page within one op_timeout for the whole listing */
	mb_op_deadline(outer && outer < deadline ? outer : deadline);
	do {
		struct mb_entry *v;

		/* a service whose nextOffset never ends must not keep a
		 * readdir going for ever */
		if (offset > LIST_MAX_OFFSET) {
			r = mb_err_set(err, EPROTO, "cannot list '%.256s': the "
				       "listing goes on past offset %lu", path,
				       (unsigned long)LIST_MAX_OFFSET);
			goto out;
		}
		r = mb_fs_list(c, who, path, MB_MAX_LIST_ENTRIES, offset, &page,
			       &next, err);
		if (r)
			goto out;
		v = realloc(all.v, (all.n + page.n + 1) * sizeof(*v));
		if (!v) {
			mb_entry_list_release(&page);
			r = mb_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
		all.v = v;
		memcpy(all.v + all.n, page.v, page.n * sizeof(*v));
		all.n += page.n;
		free(page.v);   /* the entries moved into all */
		offset = (unsigned long)next;
	} while (next >= 0);
	*out = all;
	all.v = NULL;
	all.n = 0;
out:
	mb_op_deadline(outer);
	mb_entry_list_release(&all);
	return r;
}

int mb_fs_stat(struct mb_client *c, const struct mb_ident *who,
	       const char *path, bool follow_symlinks, struct mb_entry *out,
	       struct mb_err *err)
{
	const char *query[] = { "path", path, "followSymlinks",
				follow_symlinks ? "true" : "false", NULL };
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_STAT, .what = what, .method = "GET",
		.route = "/containers/files/stat", .who = who, .query = query,
		.pool = true, .retry = MB_RETRY_READ,
	};
	struct mb_http_resp resp;
	cJSON *doc = NULL;
	int r;

	mb_call_what(what, sizeof(what), "cannot stat", path);
	mb_http_resp_init(&resp);
	if ((r = mb_call_run(c, &k, &resp, err)) ||
	    (r = mb_call_json(&k, &resp, &doc, err)))
		goto out;
	r = parse_entry(doc, false, out, what, err);
out:
	cJSON_Delete(doc);
	mb_http_resp_release(&resp);
	return r;
}

/* Run a metadata mutation with a JSON body built from o (consumed). */
static int mutate(struct mb_client *c, struct mb_call *k, cJSON *o,
		  struct mb_err *err)
{
	struct mb_http_resp resp;
	char *body = NULL;
	int r;

	mb_http_resp_init(&resp);
	if (o) {
		body = cJSON_PrintUnformatted(o);
		if (!body) {
			r = mb_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
		k->body = body;
		k->body_len = strlen(body);
		k->has_body = true;
		k->content_type = "application/json";
	}
	k->pool = true;
	k->retry = MB_RETRY_MUTATION;
	r = mb_call_run(c, k, &resp, err);
out:
	free(body);
	cJSON_Delete(o);
	mb_http_resp_release(&resp);
	return r;
}

static char *mode_str(unsigned mode, char buf[8])
{
	snprintf(buf, 8, "0%03o", mode & 0777);
	return buf;
}

int mb_fs_mkdir(struct mb_client *c, const struct mb_ident *who,
		const char *path, bool recursive, unsigned mode,
		struct mb_err *err)
{
	char what[MB_WHAT_MAX], m[8];
	struct mb_call k = {
		.op = MB_OP_MKDIR, .what = what, .method = "POST",
		.route = "/containers/files/mkdir", .who = who,
	};
	cJSON *o = cJSON_CreateObject();

	mb_call_what(what, sizeof(what), "cannot create directory", path);
	if (!o || !cJSON_AddStringToObject(o, "path", path) ||
	    !cJSON_AddBoolToObject(o, "recursive", recursive) ||
	    !cJSON_AddStringToObject(o, "mode", mode_str(mode, m))) {
		cJSON_Delete(o);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	return mutate(c, &k, o, err);
}

int mb_fs_remove(struct mb_client *c, const struct mb_ident *who,
		 const char *path, bool recursive, struct mb_err *err)
{
	const char *query[] = { "path", path, recursive ? "recursive" : NULL,
				"true", NULL };
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_REMOVE, .what = what, .method = "DELETE",
		.route = "/containers/files/remove", .who = who, .query = query,
	};

	mb_call_what(what, sizeof(what), "cannot remove", path);
	return mutate(c, &k, NULL, err);
}

int mb_fs_move(struct mb_client *c, const struct mb_ident *who,
	       const char *src, const char *dst, struct mb_err *err)
{
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_MOVE, .what = what, .method = "POST",
		.route = "/containers/files/move", .who = who,
	};
	cJSON *o = cJSON_CreateObject();

	snprintf(what, sizeof(what), "cannot move '%.140s' to '%.140s'", src, dst);
	if (!o || !cJSON_AddStringToObject(o, "path", src) ||
	    !cJSON_AddStringToObject(o, "destination", dst)) {
		cJSON_Delete(o);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	return mutate(c, &k, o, err);
}

int mb_fs_chmod(struct mb_client *c, const struct mb_ident *who,
		const char *path, unsigned mode, struct mb_err *err)
{
	const char *query[] = { "path", path, NULL };
	char what[MB_WHAT_MAX], m[8];
	struct mb_call k = {
		.op = MB_OP_CHMOD, .what = what, .method = "PATCH",
		.route = "/containers/files/chmod", .who = who, .query = query,
	};
	cJSON *o = cJSON_CreateObject();

	mb_call_what(what, sizeof(what), "cannot change mode of", path);
	mode &= 07777;   /* callers may pass st_mode with the type bits */
	if (mode & ~0777u) {
		cJSON_Delete(o);
		return mb_err_set(err, EPERM, "%s: special bits (%04o) cannot be set",
				  what, mode);
	}
	if (!o || !cJSON_AddStringToObject(o, "mode", mode_str(mode, m))) {
		cJSON_Delete(o);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	return mutate(c, &k, o, err);
}
