/* exec.c: running one command on the guest (mbfs_exec, see remote.h):
 * in a clean shell (mb_exec_clean: no profile, a fixed PATH, so nothing
 * the sandbox put in its PATH or profile runs in place of our tools),
 * inline in the exec request when it fits, else packed (gzip, base64) in
 * it, else as a script file. Builds no commands (remote.c, touch.c, xfer.c
 * do) and interprets no output. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"

#include <zlib.h>

#define PUT_TRIES 3

/* The script's own output (mb_exec_clean_take), or -EIO when the
 * sandbox's login shell never ran it (nothing of ours ran: not
 * ambiguous). */
static int take(struct mb_exec_result *res, struct mb_err *err)
{
	if (mb_exec_clean_take(res))
		return 0;
	int rc = mb_err_set(err, EIO, "the sandbox's login shell did not run "
			    "mbfs's command (its profile?): %.200s",
			    res->errout ? res->errout : "");
	/* the service answered (200): an EIO of no answer would be taken
	 * for a passing fault and tried again until op_timeout, when the
	 * profile will only ever end the shell the same way */
	err->http_status = 200;
	mb_exec_result_release(res);
	return rc;
}

/* A command too large for the exec request (contract §3: 16 KiB of
 * command, 32 KiB of JSON, and escapes count) goes up as a file in the
 * guest's /tmp and runs in a clean shell. The script removes itself
 * before anything else, so it is gone however the command ends, and one
 * that never started is removed here. A planted name is never followed:
 * the name is random, PUT refuses a symlink at the target and replaces
 * whatever appears there meanwhile by rename (§4.3), and the runner
 * refuses a file that is not a regular one (or a /tmp that is a link,
 * where the PUT went elsewhere), removing what it refuses. */
#define RUN_FILE "if [ -L /tmp ] || [ -L \"$f\" ] || [ ! -f \"$f\" ]; then " \
	"rm -f -- \"$f\"; echo \"mbfs: refusing to run '$f': not our own file\" >&2; " \
	"exit 126; fi; exec /bin/sh \"$f\""

static int exec_as_file(struct mbfs *fs, const char *cmd, long timeout_ms,
			struct mb_exec_result *res, struct mb_err *err)
{
	char hex[17], path[64];
	struct mb_buf script, line;
	int rc;

	if (mb_random_hex(hex, 8))
		return mb_err_set(err, EIO, "cannot run a long command: no random bytes");
	snprintf(path, sizeof(path), "/tmp/.mbfs-sh-%s", hex);
	mb_buf_init(&script, MB_MAX_FILE_BYTES);
	rc = mb_buf_appendf(&script, "rm -f -- \"$0\"\n%s\n", cmd);
	if (rc) {
		mb_buf_release(&script);
		return mb_err_set(err, rc == -E2BIG ? E2BIG : ENOMEM,
				  "cannot run a command of %zu bytes", strlen(cmd));
	}
	mb_buf_init(&line, 4096);
	rc = mb_buf_appendf(&line, "f=%s; %s", path, RUN_FILE);
	if (!rc) {
		struct mb_buf w;

		mb_buf_init(&w, 4096);
		rc = mb_exec_clean(&w, line.data, 0);
		mb_buf_release(&line);
		line = w;
	}
	if (rc) {
		mb_buf_release(&script);
		mb_buf_release(&line);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	/* a private name: repeating an unconfirmed PUT is harmless */
	for (int t = 0; t < PUT_TRIES; t++) {
		mb_err_clear(err);
		rc = mb_file_put(fs->client, &fs->ident, path, script.data,
				 script.len, err);
		if (!rc || !(err->ambiguous || err->http_status >= 500) ||
		    mb_err_is_stopped(err))
			break;
		if (t + 1 < PUT_TRIES)
			mb_sleep_ms(mb_backoff_ms((unsigned)t, 250, 2000));
	}
	mb_buf_release(&script);
	if (rc) {
		mb_buf_release(&line);
		return rc;
	}
	mb_log(MB_LOG_DEBUG, "exec (as %s, %zu bytes): %.200s", path,
	       strlen(cmd), cmd);
	rc = mb_exec(fs->client, &fs->ident, line.data, timeout_ms, res, err);
	mb_buf_release(&line);
	rc = rc ? rc : take(res, err);
	if (rc && !mb_err_is_stopped(err)) {
		/* still there: the script never started; gone: it did */
		struct mb_err e2;
		mb_err_clear(&e2);
		if (mb_fs_remove(fs->client, &fs->ident, path, false, &e2) &&
		    e2.errnum != ENOENT)
			mb_log(MB_LOG_DEBUG, "cannot remove '%s' on the guest: %s",
			       path, e2.msg);
	}
	return rc;
}

/* The guest could not unpack a command (no gzip or base64, or they
 * failed): nothing is packed again. */
static atomic_bool no_unpack;
#define NO_UNPACK "mbfs: the sandbox cannot unpack a command"

/* cmd (n bytes, no trailing newline) gzip'd into *out (malloc'd). */
static int gzip_text(const char *cmd, size_t n, unsigned char **out,
		     size_t *len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	/* 31: a gzip header, which gzip -d wants */
	if (deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	uLong cap = deflateBound(&z, (uLong)n) + 64;
	unsigned char *buf = malloc(cap);
	if (!buf) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)(uintptr_t)cmd;
	z.avail_in = (uInt)n;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	int zr = deflate(&z, Z_FINISH);
	*len = z.total_out;
	deflateEnd(&z);
	if (zr != Z_STREAM_END) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	return 0;
}

/* A command too large for the request may fit packed: the guest's sh
 * unpacks it (base64, gzip) and, once it has every byte, evals it in
 * itself, so the "set --" line of mbfs_sh_cmd sets the script's
 * arguments. A text cut short is never run. 1 with *packed (the caller
 * releases it) when that fits, 0 when not, -errno. */
static int pack_cmd(const char *cmd, struct mb_buf *packed)
{
	size_t n = strlen(cmd);
	while (n && cmd[n - 1] == '\n')
		n--;   /* $(...) drops them: the length check counts without */
	if (atomic_load(&no_unpack) || n > 64 * MB_MAX_COMMAND_BYTES)
		return 0;
	unsigned char *gz = NULL;
	char *b64 = NULL;
	size_t gzlen = 0, blen = 0;
	int rc = gzip_text(cmd, n, &gz, &gzlen);
	if (!rc && mb_base64_encode(gz, gzlen, &b64, &blen))
		rc = -ENOMEM;
	free(gz);
	if (rc)
		return rc;
	/* nothing runs unless every byte came: else the marker, and the
	 * caller sends the command as a file */
	rc = mb_buf_appendf(packed, "if command -v gzip >/dev/null && "
			    "command -v base64 >/dev/null && "
			    "t=$(printf %%s '%s' | base64 -d | gzip -dc) && "
			    "[ ${#t} -eq %zu ]; then eval \"$t\"; else "
			    "echo '" NO_UNPACK " (gzip, base64)' >&2; exit 126; "
			    "fi", b64, n);
	free(b64);
	if (rc)
		return rc == -E2BIG ? 0 : rc;
	return mb_exec_clean_fits(packed->data, 0) ? 1 : 0;
}

static int exec_line(struct mbfs *fs, const char *cmd, const char *what,
		     long timeout_ms, struct mb_exec_result *res,
		     struct mb_err *err);

int mbfs_exec(struct mbfs *fs, const char *cmd, long timeout_ms,
	      struct mb_exec_result *res, struct mb_err *err)
{
	int rc;

	memset(res, 0, sizeof(*res));
	mb_err_clear(err);
	/* the guest-side limit must end before the client gives up */
	long cap = fs->op_ms > 10000 ? (long)fs->op_ms - 5000 : (long)fs->op_ms / 2;
	if (timeout_ms <= 0 || timeout_ms > cap)
		timeout_ms = cap;
	if (!mb_exec_clean_fits(cmd, 0)) {
		struct mb_buf packed;
		mb_buf_init(&packed, 2 * MB_MAX_COMMAND_BYTES);
		int pr = pack_cmd(cmd, &packed);
		if (pr == 1) {
			rc = exec_line(fs, packed.data, cmd, timeout_ms, res, err);
			mb_buf_release(&packed);
			/* refused before anything ran: as a file, from now on */
			if (rc || !res->has_exit_code || res->exit_code != 126 ||
			    !res->errout || !strstr(res->errout, NO_UNPACK))
				return rc;
			mb_log(MB_LOG_INFO, "the sandbox cannot unpack a command "
			       "(gzip, base64): long commands go up as files");
			atomic_store(&no_unpack, true);
			mb_exec_result_release(res);
			memset(res, 0, sizeof(*res));
		} else {
			mb_buf_release(&packed);
		}
		return exec_as_file(fs, cmd, timeout_ms, res, err);
	}
	return exec_line(fs, cmd, cmd, timeout_ms, res, err);
}

/* Run cmd, which fits the request, in a clean shell (what: what the log
 * names). */
static int exec_line(struct mbfs *fs, const char *cmd, const char *what,
		     long timeout_ms, struct mb_exec_result *res,
		     struct mb_err *err)
{
	struct mb_buf line;
	int rc;
	mb_buf_init(&line, 2 * MB_MAX_COMMAND_BYTES);
	if (mb_exec_clean(&line, cmd, 0)) {
		mb_buf_release(&line);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	mb_log(MB_LOG_DEBUG, "exec%s: %.200s", what != cmd ? " (packed)" : "",
	       what);
	rc = mb_exec(fs->client, &fs->ident, line.data, timeout_ms, res, err);
	mb_buf_release(&line);
	return rc ? rc : take(res, err);
}

void mbfs_reply_release(mbfs_reply *res)
{
	mb_exec_result_release(res);
}

int mbfs_exec_ok(const mbfs_reply *res)
{
	return res->has_exit_code && res->exit_code == 0 && !res->timed_out;
}
