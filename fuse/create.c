/* create.c: `mbfs --create` (see create.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/create.h"

#define CREATE_WAIT_MS 120000
#define CREATE_POLL_MS 1000

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

/* Write the key and body to a new 0600 file; path into file. */
static int save_request(const char *key, const char *catalog, const char *size,
			char *file, size_t n, struct mb_err *err)
{
	char dir[PATH_MAX];
	int rc = state_dir(dir, sizeof(dir));
	if (rc)
		return mb_err_set(err, -rc, "cannot create the state directory "
				  "for the creation key: %s", strerror(-rc));
	if (snprintf(file, n, "%s/create-%s.json", dir, key) >= (int)n)
		return mb_err_set(err, ENAMETOOLONG, "state path too long");
	struct mb_buf b;
	mb_buf_init(&b, 4096);
	rc = mb_buf_appendf(&b, "{\"idempotencyKey\":\"%s\",\"body\":{", key);
	if (!rc && catalog)
		rc = mb_buf_appendf(&b, "\"catalogId\":\"%s\"%s", catalog,
				    size ? "," : "");
	if (!rc && size)
		rc = mb_buf_appendf(&b, "\"size\":\"%s\"", size);
	if (!rc)
		rc = mb_buf_appends(&b, "}}\n");
	int fd = rc ? -1 : open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len || fsync(fd)) {
		rc = mb_err_set(err, errno ? errno : EIO,
				"cannot save the creation key in '%s': %s", file,
				strerror(errno ? errno : EIO));
		unlink(file);
	}
	if (fd >= 0)
		close(fd);
	mb_buf_release(&b);
	return rc;
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

int mbfs_create_container(struct mb_client *c, const char *catalog,
			  const char *size, struct mb_ident *out,
			  struct mb_err *err)
{
	if (!valid_word(catalog) || !valid_word(size))
		return mb_err_set(err, EINVAL, "invalid --catalog or --size value");
	char key[33], file[PATH_MAX];
	if (mb_random_hex(key, 16))
		return mb_err_set(err, EIO, "no random bytes for the creation key");
	int rc = save_request(key, catalog, size, file, sizeof(file), err);
	if (rc)
		return rc;
	struct mb_create_req req = {
		.catalog_id = catalog, .size = size, .idempotency_key = key,
	};
	struct mb_creation cr;
	uint64_t deadline = mb_now_ms() + CREATE_WAIT_MS;
	for (;;) {
		mb_err_clear(err);
		rc = mb_container_create(c, &req, &cr, err);
		if (rc == 0 && strcmp(cr.status, "running") == 0)
			break;
		if (rc && rc != -EAGAIN) {
			unlink(file);   /* a definite answer: nothing pending */
			return rc;
		}
		if (mb_now_ms() >= deadline) {
			return mb_err_set(err, ETIMEDOUT, "container creation is "
					  "still unresolved after %d s; its key "
					  "is saved in '%s' (do not start another "
					  "one blindly)", CREATE_WAIT_MS / 1000, file);
		}
		mb_sleep_ms(CREATE_POLL_MS);
	}
	/* confirm the generation in the list before using it */
	struct mb_container ct;
	rc = mb_container_find(c, cr.container_id, &ct, err);
	if (rc == 0 && strcmp(ct.created_at, cr.created_at) != 0)
		rc = mb_err_set(err, ESTALE, "container '%s' was created but its "
				"slot now runs generation %s", cr.container_id,
				ct.created_at);
	if (rc)
		return rc;
	unlink(file);
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", cr.container_id);
	snprintf(out->created_at, sizeof(out->created_at), "%s", cr.created_at);
	return 0;
}
