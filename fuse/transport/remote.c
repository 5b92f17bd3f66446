/* remote.c: failure reporting, the command that runs a
 * script of fuse/guest/ with its arguments, and the namespace operations
 * done with one exec on the guest (see remote.h). Does not cache (cache.c)
 * and does not move file data (xfer.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/report.h"

#define STATFS_TTL_MS 5000

/* errnos that mean "the service could not be reached or answered oddly":
 * an application is better served by EIO. */
static int is_transport_errno(int e)
{
	switch (e) {
	case ECONNREFUSED: case ECONNRESET: case ECONNABORTED:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EPROTO:
	case EAGAIN: case EPIPE: case EBADMSG: case ESTALE: case EUSERS:
		return 1;
	default:
		return 0;
	}
}

int mbfs_fail(struct mbfs *fs, int rc, const struct mb_err *err)
{
	if (rc == 0)
		return 0;
	if (err && mb_err_is_stopped(err)) {
		atomic_store(&fs->stopped, 1);
		if (!atomic_exchange(&fs->stop_logged, 1))
			mb_log(MB_LOG_ERR, "container '%s' generation %s is no "
			       "longer running: every operation on %s now "
			       "fails; unmount with 'fusermount3 -u %s'",
			       fs->ident.id, fs->ident.created_at,
			       fs->mountpoint, fs->mountpoint);
		return -ENOTCONN;
	}
	int e = rc < 0 ? -rc : rc;
	if (e == ENOENT || e == EEXIST || e == ENOTEMPTY || e == ENOTDIR ||
	    e == EISDIR)
		mb_log(MB_LOG_DEBUG, "%s", err && err->msg[0] ? err->msg : strerror(e));
	else
		mb_log(MB_LOG_WARN, "%s", err && err->msg[0] ? err->msg : strerror(e));
	if (is_transport_errno(e))
		return -EIO;
	return -e;
}

int mbfs_stderr_errno(const char *t)
{
	static const struct { const char *text; int e; } map[] = {
		{ "overwrite non-directory", ENOTDIR },
		{ "overwrite directory", EISDIR },
		{ "Directory not empty", ENOTEMPTY },
		{ "No such file or directory", ENOENT },
		{ "Directory nonexistent", ENOENT },
		{ "File exists", EEXIST },
		{ "cannot overwrite existing file", EEXIST },
		{ "Not a directory", ENOTDIR },
		{ "Is a directory", EISDIR },
		{ "Permission denied", EACCES },
		{ "Operation not permitted", EPERM },
		{ "No space left on device", ENOSPC },
		{ "Disk quota exceeded", EDQUOT },
		{ "Read-only file system", EROFS },
		{ "File name too long", ENAMETOOLONG },
		{ "Too many levels of symbolic links", ELOOP },
		{ "Invalid cross-device link", EXDEV },
		{ "subdirectory of itself", EINVAL },
		{ "Invalid argument", EINVAL },
		{ "Too many links", EMLINK },
		{ "File too large", EFBIG },
	};
	if (!t)
		return -EIO;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strstr(t, map[i].text))
			return -map[i].e;
	return -EIO;
}

int mbfs_exec_simple(struct mbfs *fs, const char *cmd, long timeout_ms)
{
	struct mb_exec_result res;
	struct mb_err err;
	int rc = mbfs_exec(fs, cmd, timeout_ms, &res, &err);
	if (rc)
		return mbfs_fail(fs, rc, &err);
	if (!mbfs_exec_ok(&res)) {
		rc = res.timed_out ? -ETIMEDOUT : mbfs_stderr_errno(res.errout);
		mb_log(MB_LOG_DEBUG, "command failed (%s): %.300s", strerror(-rc),
		       res.errout ? res.errout : "");
	}
	mb_exec_result_release(&res);
	return rc;
}

int mbfs_sh_arg(struct mb_buf *b, const char *arg)
{
	size_t old = b->len;
	int rc = mb_buf_appends(b, " ");
	if (!rc && (rc = mb_buf_append_shq(b, arg))) {
		b->len = old;   /* a failed append changes nothing */
		b->data[old] = '\0';
	}
	return rc;
}

int mbfs_sh_body(struct mb_buf *b, const char *script)
{
	size_t old = b->len;
	int rc = mb_buf_appends(b, "\n");
	if (!rc && (rc = mb_buf_appends(b, script))) {
		b->len = old;
		b->data[old] = '\0';
	}
	return rc;
}

int mbfs_sh_cmd(struct mb_buf *b, const char *script,
		const char *const *argv, size_t argc)
{
	int rc = mb_buf_appends(b, MBFS_SH_ARGS);
	for (size_t i = 0; i < argc && !rc; i++)
		rc = mbfs_sh_arg(b, argv[i]);
	return rc ? rc : mbfs_sh_body(b, script);
}

/* What a command should have done, to look for after an ambiguous failure
 * (an exec is never repeated blindly). */
enum check_kind {
	CHK_NONE, CHK_SYMLINK, CHK_EXISTS, CHK_DIR, CHK_GONE, CHK_MOVED,
	CHK_SIZE
};

struct outcome {
	enum check_kind kind;
	const char *path, *path2;   /* mount paths */
	const char *target;         /* CHK_SYMLINK */
	uint64_t size;              /* CHK_SIZE */
};

/* 1 when an lstat of the mount path succeeds (entry in *e, to release),
 * 0 when missing, -1 when unknown. */
static int look(struct mbfs *fs, const char *path, struct mb_entry *e)
{
	char rpath[MB_PATH_MAX];
	struct mb_err err;
	mb_err_clear(&err);
	if (mbfs_remote_path(fs, path, rpath))
		return -1;
	int rc = mb_fs_stat(fs->client, &fs->ident, rpath, false, e, &err);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : -1;
}

static bool took_effect(struct mbfs *fs, const struct outcome *o)
{
	struct mb_entry e;
	int r = look(fs, o->path, &e);
	if (o->kind == CHK_MOVED) {
		if (r == 1)
			mb_entry_release(&e);
		if (r != 0 || look(fs, o->path2, &e) != 1)
			return false;
		mb_entry_release(&e);
		return true;
	}
	if (o->kind == CHK_GONE) {
		if (r == 1)
			mb_entry_release(&e);
		return r == 0;   /* a 404 after a remove means it happened */
	}
	if (r != 1)
		return false;
	bool ok = o->kind == CHK_EXISTS ||
		  (o->kind == CHK_DIR && e.type == MB_FT_DIR) ||
		  (o->kind == CHK_SIZE && e.size == o->size) ||
		  (o->kind == CHK_SYMLINK && e.type == MB_FT_SYMLINK &&
		   e.link_target && strcmp(e.link_target, o->target) == 0);
	mb_entry_release(&e);
	return ok;
}

int mbfs_remote_sha256(struct mbfs *fs, const char *rpath, char hex[65])
{
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mb_buf_appends(&b, "sha256sum -- ");
	if (!rc)
		rc = mb_buf_append_shq(&b, rpath);
	if (rc) {
		mb_buf_release(&b);
		return rc;
	}
	struct mb_exec_result res;
	struct mb_err err;
	rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err);
	mb_buf_release(&b);
	if (rc)
		return mbfs_fail(fs, rc, &err);
	if (!mbfs_exec_ok(&res))
		rc = mbfs_stderr_errno(res.errout);
	else if ((rc = mbfs_report_sha256(res.out, res.out_len, hex, &err)))
		mb_log(MB_LOG_WARN, "sha256 of '%s': %s", rpath, err.msg);
	mb_exec_result_release(&res);
	return rc;
}

/* Run fuse/guest/ns.sh OP ARG... (each ARG a guest path or a literal)
 * for the mount path(s) named in what ("'/a'", "'/a' to '/b'"): 0, or
 * -errno mapped from the tool's message, -ELOOP (one warning naming
 * them) when the script refused a path that
 * passes through a symlink below the mounted directory. After an
 * ambiguous failure of the request, o (may be NULL) says how to recognise
 * that it ran: then 0 and *sure false. word (may be NULL, wn bytes): the
 * first line the script printed ("" for none). */
static int run_ns(struct mbfs *fs, const char *what, const char *op,
		  const char *const *args, size_t n, const struct outcome *o,
		  bool *sure, char *word, size_t wn)
{
	const char *argv[2 + 2 + 2];
	struct mb_buf b;
	if (sure)
		*sure = false;
	if (word && wn)
		word[0] = '\0';
	argv[0] = fs->root;
	argv[1] = op;
	for (size_t i = 0; i < n && i < 4; i++)
		argv[2 + i] = args[i];
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mbfs_sh_cmd(&b, mbfs_sh_ns, argv, 2 + (n < 4 ? n : 4));
	if (rc) {
		mb_buf_release(&b);
		return rc == -E2BIG ? -ENAMETOOLONG : rc;
	}
	struct mb_exec_result res;
	struct mb_err err;
	rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err);
	mb_buf_release(&b);
	if (rc) {
		if (err.ambiguous && !mb_err_is_stopped(&err) && o &&
		    took_effect(fs, o)) {
			mb_log(MB_LOG_INFO, "an unconfirmed command on '%s' took "
			       "effect", o->path);
			return 0;
		}
		return mbfs_fail(fs, rc, &err);
	}
	if (res.has_exit_code && res.exit_code == MBFS_NS_REFUSED) {
		rc = -ELOOP;
		mb_log(MB_LOG_WARN, "refused to %s %s: a directory on its way "
		       "is a symlink on the sandbox, which leads out of the "
		       "mounted directory", op, what);
	} else if (!mbfs_exec_ok(&res)) {
		rc = res.timed_out ? -ETIMEDOUT : mbfs_stderr_errno(res.errout);
		mb_log(MB_LOG_DEBUG, "%s %s failed (%s): %.300s", op, what,
		       strerror(-rc), res.errout ? res.errout : "");
	} else {
		if (sure)
			*sure = true;
		if (word && wn) {
			size_t l = res.out ? strcspn(res.out, "\n") : 0;
			snprintf(word, wn, "%.*s", (int)l, l ? res.out : "");
		}
	}
	mb_exec_result_release(&res);
	return rc;
}

/* run_ns with one path argument after a literal (or none: lit NULL). */
static int ns_one(struct mbfs *fs, const char *op, const char *lit,
		  const char *path, const struct outcome *o, bool *sure)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	char what[MB_PATH_MAX + 2];
	snprintf(what, sizeof(what), "'%s'", path);
	const char *args[] = { lit ? lit : rpath, rpath };
	return run_ns(fs, what, op, args, lit ? 2 : 1, o, sure, NULL, 0);
}

/* run_ns with two mount paths. */
static int ns_two(struct mbfs *fs, const char *op, const char *from,
		  const char *to, const struct outcome *o, bool *sure,
		  char *word, size_t wn)
{
	char rfrom[MB_PATH_MAX], rto[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, from, rfrom);
	if (!rc)
		rc = mbfs_remote_path(fs, to, rto);
	if (rc)
		return rc;
	char what[2 * MB_PATH_MAX + 8];
	snprintf(what, sizeof(what), "'%s' to '%s'", from, to);
	const char *args[] = { rfrom, rto };
	return run_ns(fs, what, op, args, 2, o, sure, word, wn);
}

int mbfs_remote_symlink(struct mbfs *fs, const char *target, const char *path)
{
	struct outcome o = { .kind = CHK_SYMLINK, .path = path, .target = target };
	return ns_one(fs, "symlink", target, path, &o, NULL);
}

int mbfs_remote_link(struct mbfs *fs, const char *from, const char *to)
{
	struct outcome o = { .kind = CHK_EXISTS, .path = to };
	return ns_two(fs, "link", from, to, &o, NULL, NULL, 0);
}

int mbfs_remote_truncate(struct mbfs *fs, const char *path, uint64_t size)
{
	char n[24];
	snprintf(n, sizeof(n), "%" PRIu64, size);
	struct outcome o = { .kind = CHK_SIZE, .path = path, .size = size };
	return ns_one(fs, "truncate", n, path, &o, NULL);
}

int mbfs_remote_remove(struct mbfs *fs, const char *path, bool dir, bool *sure)
{
	struct outcome o = { .kind = CHK_GONE, .path = path };
	return ns_one(fs, dir ? "rmdir" : "rm", NULL, path, &o, sure);
}

int mbfs_remote_mkdir(struct mbfs *fs, const char *path, unsigned mode,
		      bool *sure)
{
	char m[8];
	snprintf(m, sizeof(m), "%04o", mode & 07777);
	struct outcome o = { .kind = CHK_DIR, .path = path };
	return ns_one(fs, "mkdir", m, path, &o, sure);
}

int mbfs_remote_rename(struct mbfs *fs, const char *from, const char *to,
		       bool noreplace, bool *sure)
{
	char word[8];
	/* done when the source is gone and the destination is there */
	struct outcome o = { .kind = CHK_MOVED, .path = from, .path2 = to };
	int rc = ns_two(fs, noreplace ? "mvn" : "mv", from, to, &o, sure,
			word, sizeof(word));
	if (rc == 0 && strcmp(word, "same") == 0)
		return 1;
	if (rc == 0 && strcmp(word, "over") == 0)
		*sure = false;   /* what to was is gone: looked up again */
	return rc;
}

int mbfs_remote_chmod(struct mbfs *fs, const char *path, unsigned mode)
{
	char m[8];
	snprintf(m, sizeof(m), "%04o", mode & 07777);
	return ns_one(fs, "chmod", m, path, NULL, NULL);
}

int mbfs_remote_chmod_new(struct mbfs *fs, const char *path, unsigned mode)
{
	if (mode & 07000)
		return mbfs_remote_chmod(fs, path, mode);
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	struct mb_err err;
	mb_err_clear(&err);
	rc = mb_fs_chmod(fs->client, &fs->ident, rpath, mode & 0777, &err);
	if (rc && err.ambiguous && !mb_err_is_stopped(&err)) {
		/* setting a mode twice is harmless: no need to look first */
		mb_err_clear(&err);
		rc = mb_fs_chmod(fs->client, &fs->ident, rpath, mode & 0777, &err);
	}
	return mbfs_fail(fs, rc, &err);
}

static pthread_mutex_t statfs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct statvfs statfs_cached;   /* protected by statfs_lock */
static uint64_t statfs_until;          /* protected by statfs_lock */

int mbfs_remote_statfs(struct mbfs *fs, struct statvfs *out)
{
	pthread_mutex_lock(&statfs_lock);
	if (statfs_until > mb_now_ms()) {
		*out = statfs_cached;
		pthread_mutex_unlock(&statfs_lock);
		return 0;
	}
	pthread_mutex_unlock(&statfs_lock);

	char rpath[MB_PATH_MAX];
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mbfs_remote_path(fs, "/", rpath);
	if (!rc) {
		const char *argv[] = { rpath };
		rc = mbfs_sh_cmd(&b, mbfs_sh_statfs, argv, 1);
	}
	if (rc) {
		mb_buf_release(&b);
		return rc;
	}
	struct mb_exec_result res;
	struct mb_err err;
	rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err);
	mb_buf_release(&b);
	if (rc)
		return mbfs_fail(fs, rc, &err);
	struct statvfs sv;
	if (!mbfs_exec_ok(&res))
		rc = mbfs_stderr_errno(res.errout);
	else if ((rc = mbfs_report_df(res.out, &sv, &err)))
		mb_log(MB_LOG_WARN, "statfs: %s", err.msg);
	mb_exec_result_release(&res);
	if (rc)
		return rc;
	pthread_mutex_lock(&statfs_lock);
	statfs_cached = sv;
	statfs_until = mb_now_ms() + STATFS_TTL_MS;
	pthread_mutex_unlock(&statfs_lock);
	*out = sv;
	return 0;
}
