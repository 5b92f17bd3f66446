/* ident.c: container spec parsing and the mount's control file (JSON). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/buf.h"
#include "common/ident.h"
#include "common/json.h"
#include "common/util.h"

int mb_ident_valid_id(const char *id)
{
	uint64_t n;

	if (!id)
		return 0;
	if (strcmp(id, "small") == 0)
		return 1;
	if (id[0] != 'c' || id[1] < '1' || id[1] > '9')
		return 0;
	return mb_parse_u64(id + 1, 1, 499, &n) == 0;
}

int mb_ident_parse_spec(const char *spec, struct mb_ident *out,
			char dir_out[MB_PATH_MAX], struct mb_err *err)
{
	const char *dir, *at, *end;
	size_t idlen, genlen = 0;
	struct mb_ident id;

	if (!spec || !*spec)
		return mb_err_set(err, EINVAL, "empty container spec");
	memset(&id, 0, sizeof(id));
	/* A generation holds colons ("12:00:00"), so only ":/" starts the
	 * remote directory. */
	dir = strstr(spec, ":/");
	end = dir ? dir : spec + strlen(spec);
	at = memchr(spec, '@', (size_t)(end - spec));
	idlen = (size_t)((at ? at : end) - spec);
	if (idlen == 0 || idlen >= sizeof(id.id))
		return mb_err_set(err, EINVAL,
				  "invalid container spec '%.100s': expected CONTAINER[@GENERATION][:/DIR]",
				  spec);
	memcpy(id.id, spec, idlen);
	/* "small:workspace": a remote directory without its leading slash
	 * (an id has no colon; a generation's colons come after '@') */
	const char *colon = memchr(spec, ':', idlen);
	const char *gz = at ? memchr(at, 'Z', (size_t)(end - at)) : NULL;
	if (!colon && gz && gz[1] == ':' && gz + 1 < end)
		colon = gz + 1;
	if (colon) {
		size_t cl = (size_t)(colon - spec);
		return mb_err_set(err, EINVAL,
				  "invalid remote directory '%s' in '%.100s': it must "
				  "be absolute, as in '%.*s:/%s'", colon + 1, spec,
				  (int)cl, spec, colon + 1);
	}
	if (!mb_ident_valid_id(id.id))
		return mb_err_set(err, EINVAL,
				  "unknown container '%s' in '%.100s': a container id "
				  "is 'small' or c1..c499", id.id, spec);
	if (at) {
		genlen = (size_t)(end - at - 1);
		if (genlen >= sizeof(id.created_at))
			return mb_err_set(err, EINVAL, "invalid generation in '%.100s'", spec);
		memcpy(id.created_at, at + 1, genlen);
		if (!mb_is_canonical_generation(id.created_at))
			return mb_err_set(err, EINVAL,
					  "invalid generation '%s' in '%.100s': expected "
					  "YYYY-MM-DDTHH:MM:SS.mmmZ", id.created_at, spec);
	}
	if (dir) {
		const char *d = dir + 1;

		if (strlen(d) >= MB_PATH_MAX)
			return mb_err_set(err, EINVAL, "remote directory too long");
		if (dir_out)
			snprintf(dir_out, MB_PATH_MAX, "%s", d);
	} else if (dir_out) {
		dir_out[0] = '\0';
	}
	*out = id;
	return 0;
}

char *mb_control_format(const struct mb_control *c)
{
	cJSON *o = cJSON_CreateObject();
	char *text = NULL, *res = NULL;
	size_t n;

	if (!o)
		return NULL;
	if (!cJSON_AddStringToObject(o, "apiUrl", c->api_url) ||
	    !cJSON_AddStringToObject(o, "id", c->ident.id) ||
	    !cJSON_AddStringToObject(o, "createdAt", c->ident.created_at) ||
	    !cJSON_AddStringToObject(o, "root", c->root) ||
	    !cJSON_AddStringToObject(o, "mountpoint", c->mountpoint) ||
	    !cJSON_AddNumberToObject(o, "pid", (double)c->pid) ||
	    !cJSON_AddStringToObject(o, "version", c->version[0] ? c->version : MB_VERSION) ||
	    (c->expires_at[0] && !cJSON_AddStringToObject(o, "expiresAt", c->expires_at)) ||
	    (c->agent[0] && !cJSON_AddStringToObject(o, "agent", c->agent)))
		goto out;
	text = cJSON_PrintUnformatted(o);
	if (!text)
		goto out;
	n = strlen(text);
	res = malloc(n + 2);
	if (res) {
		memcpy(res, text, n);
		res[n] = '\n';
		res[n + 1] = '\0';
	}
out:
	free(text);
	cJSON_Delete(o);
	return res;
}

int mb_control_parse(const char *json, size_t len, struct mb_control *out,
		     struct mb_err *err)
{
	static const char what[] = "invalid control file";
	struct mb_control c;
	cJSON *o = NULL;
	long long pid = 0;
	int r;

	memset(&c, 0, sizeof(c));
	r = mb_json_parse(json, len, &o, what, err);
	if (r)
		return r;
	if ((r = mb_json_get_strbuf(o, "apiUrl", true, c.api_url, sizeof(c.api_url), what, err)) ||
	    (r = mb_json_get_strbuf(o, "id", true, c.ident.id, sizeof(c.ident.id), what, err)) ||
	    (r = mb_json_get_strbuf(o, "createdAt", true, c.ident.created_at,
				    sizeof(c.ident.created_at), what, err)) ||
	    (r = mb_json_get_strbuf(o, "root", true, c.root, sizeof(c.root), what, err)) ||
	    (r = mb_json_get_strbuf(o, "mountpoint", false, c.mountpoint,
				    sizeof(c.mountpoint), what, err)) ||
	    (r = mb_json_get_int(o, "pid", false, &pid, NULL, what, err)) ||
	    (r = mb_json_get_strbuf(o, "version", false, c.version, sizeof(c.version), what, err)) ||
	    (r = mb_json_get_strbuf(o, "expiresAt", false, c.expires_at,
				    sizeof(c.expires_at), what, err)) ||
	    (r = mb_json_get_strbuf(o, "agent", false, c.agent,
				    sizeof(c.agent), what, err)))
		goto out;
	if (!mb_ident_valid_id(c.ident.id)) {
		r = mb_err_set(err, EPROTO, "%s: bad container id '%s'", what, c.ident.id);
		goto out;
	}
	c.pid = (long)pid;
	*out = c;
out:
	cJSON_Delete(o);
	return r;
}

int mb_control_read(const char *path, struct mb_control *out, struct mb_err *err)
{
	struct mb_buf b;
	char chunk[4096];
	ssize_t n;
	int fd, r = 0;

	mb_buf_init(&b, 65536);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return mb_err_set(err, errno, "cannot open '%s': %s", path, strerror(errno));
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = mb_err_set(err, errno, "cannot read '%s': %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (mb_buf_append(&b, chunk, (size_t)n)) {
			r = mb_err_set(err, EFBIG, "cannot read '%s': control file too large", path);
			goto out;
		}
	}
	r = mb_control_parse(b.data ? b.data : "", b.len, out, err);
out:
	close(fd);
	mb_buf_release(&b);
	return r;
}

int mb_control_find(const char *dir, struct mb_control *c,
		    char rel_out[MB_PATH_MAX], struct mb_err *err)
{
	char full[PATH_MAX], cur[PATH_MAX];
	char path[PATH_MAX + sizeof(MB_CONTROL_NAME) + 2];
	struct mb_control found;
	const char *rel;
	char *slash;
	int r;

	if (!realpath(dir, full))
		return mb_err_set(err, errno, "cannot resolve '%s': %s", dir, strerror(errno));
	memcpy(cur, full, sizeof(cur));
	for (;;) {
		snprintf(path, sizeof(path), "%s/%s", strcmp(cur, "/") ? cur : "",
			 MB_CONTROL_NAME);
		r = mb_control_read(path, &found, err);
		if (r == 0)
			break;
		/* a file that is missing, unreadable or not ours: keep walking */
		if (r != -ENOENT && r != -EACCES && r != -ENOTDIR && r != -EPROTO)
			return r;
		if (strcmp(cur, "/") == 0)
			return mb_err_set(err, ENOENT,
					  "'%s' is not inside a Mainbrella mount", dir);
		slash = strrchr(cur, '/');
		if (slash == cur)
			cur[1] = '\0';
		else
			*slash = '\0';
	}
	rel = full + (strcmp(cur, "/") ? strlen(cur) : 0);
	while (*rel == '/')
		rel++;
	if (strlen(rel) >= MB_PATH_MAX)
		return mb_err_set(err, ENAMETOOLONG, "path too long: '%s'", dir);
	*c = found;
	snprintf(rel_out, MB_PATH_MAX, "%s", rel);
	return 0;
}
