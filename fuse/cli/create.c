/* create.c: `mbfs --create` (see create.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/cli/create.h"

#define CREATE_WAIT_MS 120000
#define CREATE_POLL_MS 1000
#define KEY_LIFE_SEC (24 * 3600)   /* the service keeps a key this long */

static int state_dir(char *out, size_t n)
{
	const char *x = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int len;
	if (x && x[0] == '/')
		len = snprintf(out, n, "%s/mbfs", x);
	else if (home && home[0] == '/')
		len = snprintf(out, n, "%s/.local/state/mbfs", home);
	else
		return -ENOENT;
	if (len < 0 || (size_t)len >= n)
		return -ENAMETOOLONG;
	return mb_mkdir_p(out, 0700);
}

/* A creation request saved on disk, locked by this process. */
struct saved {
	char key[33];
	char file[PATH_MAX];
	int fd;
};

static void saved_close(struct saved *sv, bool resolved)
{
	if (resolved)
		unlink(sv->file);
	if (sv->fd >= 0)
		close(sv->fd);   /* drops the lock */
	sv->fd = -1;
}

static bool same_str(const cJSON *o, const char *key, const char *want)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!want)
		return !v || cJSON_IsNull(v);
	return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

/* Read the saved request at file: 1 with sv->key when it is for api_url
 * and these options, else 0. */
static int saved_matches(const char *file, const char *api_url,
			 const char *catalog, const char *size,
			 struct saved *sv)
{
	char buf[4096];
	int fd = open(file, O_RDONLY | O_CLOEXEC), ok = 0;
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	cJSON *o = cJSON_Parse(buf);
	const cJSON *body = o ? cJSON_GetObjectItemCaseSensitive(o, "body") : NULL;
	const cJSON *key = o ? cJSON_GetObjectItemCaseSensitive(o, "idempotencyKey") : NULL;
	if (cJSON_IsObject(body) && cJSON_IsString(key) &&
	    strlen(key->valuestring) < sizeof(sv->key) &&
	    same_str(o, "apiUrl", api_url) && same_str(body, "catalogId", catalog) &&
	    same_str(body, "size", size)) {
		snprintf(sv->key, sizeof(sv->key), "%s", key->valuestring);
		ok = 1;
	}
	cJSON_Delete(o);
	return ok;
}

/* An unresolved creation saved by an earlier `mbfs --create` with the same
 * URL and options, not in use by another one: 1 with *sv (locked), or 0. */
static int resume(const char *dir, const char *api_url, const char *catalog,
		  const char *size, struct saved *sv)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	int found = 0;
	if (!dp)
		return 0;
	while (!found && (de = readdir(dp))) {
		struct stat st;
		if (strncmp(de->d_name, "create-", 7) != 0 ||
		    snprintf(sv->file, sizeof(sv->file), "%s/%s", dir, de->d_name)
		    >= (int)sizeof(sv->file) || stat(sv->file, &st))
			continue;
		if (time(NULL) - st.st_mtime > KEY_LIFE_SEC) {
			mb_log(MB_LOG_WARN, "an unresolved container creation is "
			       "saved in '%s' since more than 24 h: its key has "
			       "expired; check the account's containers, then "
			       "remove the file", sv->file);
			continue;
		}
		if (!saved_matches(sv->file, api_url, catalog, size, sv)) {
			mb_log(MB_LOG_INFO, "an unresolved container creation with "
			       "other options is saved in '%s'", sv->file);
			continue;
		}
		sv->fd = open(sv->file, O_RDWR | O_CLOEXEC);
		if (sv->fd >= 0 && flock(sv->fd, LOCK_EX | LOCK_NB) == 0)
			found = 1;   /* not another --create's */
		else if (sv->fd >= 0) {
			close(sv->fd);
			sv->fd = -1;
		}
	}
	closedir(dp);
	return found;
}

/* Save a new key with api_url and the body to a new 0600 file, locked. */
static int save_request(const char *dir, const char *api_url,
			const char *catalog, const char *size, struct saved *sv,
			struct mb_err *err)
{
	if (mb_random_hex(sv->key, 16))
		return mb_err_set(err, EIO, "no random bytes for the creation key");
	if (snprintf(sv->file, sizeof(sv->file), "%s/create-%s.json", dir,
		     sv->key) >= (int)sizeof(sv->file))
		return mb_err_set(err, ENAMETOOLONG, "state path too long");
	cJSON *o = cJSON_CreateObject();
	cJSON *body = o ? cJSON_AddObjectToObject(o, "body") : NULL;
	char *text = NULL;
	if (body) {
		cJSON_AddStringToObject(o, "idempotencyKey", sv->key);
		cJSON_AddStringToObject(o, "apiUrl", api_url);
		if (catalog)
			cJSON_AddStringToObject(body, "catalogId", catalog);
		if (size)
			cJSON_AddStringToObject(body, "size", size);
		text = cJSON_PrintUnformatted(o);
	}
	cJSON_Delete(o);
	if (!text)
		return mb_err_set(err, ENOMEM, "out of memory");
	int rc = 0;
	size_t len = strlen(text);
	errno = 0;
	sv->fd = open(sv->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (sv->fd < 0 || flock(sv->fd, LOCK_EX) ||
	    write(sv->fd, text, len) != (ssize_t)len || write(sv->fd, "\n", 1) != 1 ||
	    fsync(sv->fd)) {
		int e = errno ? errno : EIO;
		rc = mb_err_set(err, e, "cannot save the creation key in '%s': %s",
				sv->file, strerror(e));
		if (sv->fd >= 0)
			unlink(sv->file);
		saved_close(sv, false);
	}
	free(text);
	return rc;
}

/* Ask until the creation is running or the answer is definite. 0 with *cr,
 * -ESTALE when the creation has stopped, -ETIMEDOUT when still ambiguous
 * (the service was reached, or may have been, and never said), or another
 * -errno (definite: nothing was started). A service that cannot be reached
 * at all (DNS, a refused connection) ends it after the retries of one
 * request, as for a plain mount: when no attempt got through, nothing was
 * started and -EHOSTUNREACH says so; when an earlier one may have, the
 * answer is still ambiguous (-ETIMEDOUT), as it is for a resumed key.
 * err names the last cause. */
static int run_creation(struct mb_client *c, const struct mb_create_req *req,
			bool resumed, struct mb_creation *cr, struct mb_err *err)
{
	uint64_t deadline = mb_now_ms() + CREATE_WAIT_MS;
	/* an attempt may have got to the service (a resumed key's did) */
	bool reached = resumed;
	for (;;) {
		mb_err_clear(err);
		int rc = mb_container_create(c, req, cr, err);
		if (rc == 0 && strcmp(cr->status, "running") == 0)
			return 0;
		if (rc && rc != -EAGAIN)
			return rc;
		bool got_through = rc == 0 || err->http_status || err->ambiguous;
		if (!got_through)
			return reached ? -ETIMEDOUT : -EHOSTUNREACH;
		reached = true;
		if (mb_now_ms() >= deadline)
			return -ETIMEDOUT;
		mb_log(MB_LOG_DEBUG, "container creation not resolved yet (%s): "
		       "asking again with the same key",
		       rc ? err->msg : cr->status);
		mb_sleep_ms(CREATE_POLL_MS);
	}
}

static int valid_word(const char *s)
{
	if (!s)
		return 1;
	if (!*s || strlen(s) > 32)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_'))
			return 0;
	return 1;
}

/* A refused --size or --catalog: say which value and which ones there
 * are (contract §2: the sizes, and the catalog a deployment may trim). */
static void hint_values(struct mb_err *err, const char *size,
			const char *catalog)
{
	size_t n = strlen(err->msg);
	if (strcmp(err->code, "invalid_size") == 0)
		snprintf(err->msg + n, sizeof(err->msg) - n, ": --size '%s'; "
			 "the sizes are lite, small, medium, large and xl",
			 size ? size : "");
	else if (strcmp(err->code, "image_not_found") == 0 && catalog)
		snprintf(err->msg + n, sizeof(err->msg) - n, ": --catalog "
			 "'%s'; the images are node, python, rust, go and "
			 "devops", catalog);
	else if (strcmp(err->code, "image_not_available") == 0 && catalog)
		snprintf(err->msg + n, sizeof(err->msg) - n, ": --catalog "
			 "'%s' is not offered by this service now", catalog);
}

int mbfs_create_container(struct mb_client *c, const char *api_url,
			  const char *catalog, const char *size,
			  struct mb_ident *out, struct mb_err *err)
{
	if (!valid_word(catalog) || !valid_word(size))
		return mb_err_set(err, EINVAL, "invalid --catalog or --size value: "
				  "use a lowercase word, e.g. --size small");
	char dir[PATH_MAX];
	int rc = state_dir(dir, sizeof(dir));
	if (rc)
		return mb_err_set(err, -rc, "cannot create the state directory "
				  "for the creation key: %s", strerror(-rc));
	struct saved sv = { .fd = -1 };
	bool resumed = resume(dir, api_url, catalog, size, &sv);
	if (resumed)
		mb_log(MB_LOG_WARN, "resuming the unresolved container creation "
		       "saved in '%s' (same key: no second container); to start "
		       "afresh instead, delete that file", sv.file);
	else if ((rc = save_request(dir, api_url, catalog, size, &sv, err)))
		return rc;
	struct mb_create_req req = {
		.catalog_id = catalog, .size = size, .idempotency_key = sv.key,
	};
	struct mb_creation cr;
	rc = run_creation(c, &req, resumed, &cr, err);
	if (rc == -ESTALE && resumed) {
		/* the saved one is over; a replacement is never launched
		 * for it, so this --create starts its own */
		mb_log(MB_LOG_WARN, "the creation saved in '%s' has stopped: "
		       "starting a new container", sv.file);
		saved_close(&sv, true);
		if ((rc = save_request(dir, api_url, catalog, size, &sv, err)))
			return rc;
		req.idempotency_key = sv.key;
		rc = run_creation(c, &req, false, &cr, err);
	}
	if (rc == -ETIMEDOUT) {
		char why[sizeof(err->msg)];
		snprintf(why, sizeof(why), "%s", err->msg[0] ? err->msg :
			 "no answer");
		saved_close(&sv, false);
		return mb_err_set(err, ETIMEDOUT, "%s; the creation is unresolved "
				  "(it may have started a container): its key is "
				  "saved in '%s' and the next 'mbfs --create' "
				  "resumes it (delete the file to start afresh)",
				  why, sv.file);
	}
	if (rc) {
		saved_close(&sv, true);   /* a definite answer: nothing pending */
		if (!err->msg[0])
			mb_err_set(err, -rc, "cannot create a container: %s",
				   strerror(-rc));
		hint_values(err, size, catalog);
		err->errnum = -rc;
		return rc;
	}
	/* confirm the generation in the list before using it */
	struct mb_container ct;
	struct mb_err e;
	mb_err_clear(&e);
	rc = mb_container_find(c, cr.container_id, &ct, &e);
	if (rc)
		mb_err_set(err, -rc, "cannot confirm the new container '%s': %s",
			   cr.container_id, e.msg);
	if (rc == 0 && strcmp(ct.created_at, cr.created_at) != 0)
		rc = mb_err_set(err, ESTALE, "container '%s' was created but its "
				"slot now runs generation %s", cr.container_id,
				ct.created_at);
	saved_close(&sv, rc == 0);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", cr.container_id);
	snprintf(out->created_at, sizeof(out->created_at), "%s", cr.created_at);
	return 0;
}
