/* remote.h: guest-side operations that have no HTTP route, done with one
 * foreground exec each (contract §3, §4.6 "No HTTP route for"), plus the
 * helpers every module uses to build and run those commands. (utimens is
 * batched: batch.h.)
 *
 * Every guest command mbfs sends runs in the foreground and leaves no
 * process behind: the hosted runtime answers an exec only once stdout and
 * stderr reach end-of-file (a background child holding them stalls the
 * request until its timeout), and its PID 1 never reaps, so an orphan would
 * stay a zombie until the container ends (contract §9.2, §9.3). Never add
 * '&', nohup or setsid to a command here, in touch.c, in xfer.c or in a
 * script of fuse/guest/ (one that must, like mux.sh, waits for it).
 *
 * Every path argument is mount-relative ("/a/b") unless named rpath.
 * Each function returns 0 or -errno (errors from the shell commands are
 * mapped from coreutils' messages) and never retries an exec blindly: an
 * ambiguous failure is reconciled by looking at the guest. Thread-safe.
 */
#ifndef MBFS_REMOTE_H
#define MBFS_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/api.h"
#include "common/buf.h"

struct mbfs;

/* The longest command the builders here make (two quoted paths of
 * MB_PATH_MAX and some text fit); mbfs_exec decides how it travels. */
/* A guest command's answer, as mbfs_exec gives it (common's exec result:
 * out, out_len, output_truncated, exit status): the caller's, released
 * with mbfs_reply_release. Code above transport/ names it so, and never
 * calls common's exec bindings itself. */
typedef struct mb_exec_result mbfs_reply;

#define MBFS_CMD_MAX 65536u

/* The command that runs one of the scripts of fuse/guest/ (guest_sh.h)
 * with positional arguments, each quoted for sh: "set -- 'ARG'...", a
 * newline, then the script's text, which is what a reader runs by hand as
 * `dash fuse/guest/NAME.sh ARG...`. mbfs_sh_cmd writes it whole; a caller
 * that sizes a long argument list itself starts with MBFS_SH_ARGS, adds
 * each argument with mbfs_sh_arg (" 'ARG'") and ends with mbfs_sh_body.
 * 0 or -errno (-E2BIG past the buffer's max). */
#define MBFS_SH_ARGS "set --"
int mbfs_sh_arg(struct mb_buf *b, const char *arg);
int mbfs_sh_body(struct mb_buf *b, const char *script);
int mbfs_sh_cmd(struct mb_buf *b, const char *script,
		const char *const *argv, size_t argc);

/* How long a guest command of ours may run (its timeoutMs): under the
 * service's 60 s foreground cap (MB_MAX_EXEC_TIMEOUT_MS), with room for
 * the answer to come back before the request's own deadline. */
#define MBFS_EXEC_TIMEOUT_MS 50000L

/* Run cmd on the guest (exec.c). 0 with *res filled (the caller releases
 * it), even for a non-zero exit; -errno when the request itself failed (err
 * filled, err->ambiguous says whether it may have run). A command whose
 * exec request would be refused as too large (mb_exec_fits) travels as a
 * script file in the guest's /tmp that removes itself as it starts: one PUT
 * more. */
int mbfs_exec(struct mbfs *fs, const char *cmd, long timeout_ms,
	      mbfs_reply *res, struct mb_err *err);

/* 1 when res is a normal exit with status 0. */
int mbfs_exec_ok(const mbfs_reply *res);
/* Free what res holds (a zeroed one too). */
void mbfs_reply_release(mbfs_reply *res);

/* Map a failed command's stderr (coreutils / sh messages) to -errno;
 * -EIO when nothing is recognised. */
int mbfs_stderr_errno(const char *text);

/* Run cmd; 0 on exit status 0, else the mapped -errno (logged at debug). */
int mbfs_exec_simple(struct mbfs *fs, const char *cmd, long timeout_ms);

/* sha256sum of the guest file rpath into hex[65]. 0 or -errno. */
int mbfs_remote_sha256(struct mbfs *fs, const char *rpath, char hex[65]);

/* The namespace changes below run fuse/guest/ns.sh, which refuses (and
 * these return -ELOOP, with one warning naming the path) a change whose
 * path passes through a symlink below the mounted directory: a directory
 * the sandbox swapped for a link while the mount still shows it would
 * take the change outside (chmod and truncate refuse a symlink leaf too).
 * One exec each; after an ambiguous failure the guest is looked at.
 * sure (may be NULL): set true when the guest confirmed the change, false
 * when it was found done after an unconfirmed answer (or, for a rename,
 * when it replaced a destination). */
#define MBFS_NS_REFUSED 4   /* ns.sh's exit status for a refused path */
int mbfs_remote_symlink(struct mbfs *fs, const char *target, const char *path);
int mbfs_remote_link(struct mbfs *fs, const char *from, const char *to);
int mbfs_remote_truncate(struct mbfs *fs, const char *path, uint64_t size);
/* unlink(2) (dir false) or rmdir(2). */
int mbfs_remote_remove(struct mbfs *fs, const char *path, bool dir, bool *sure);
/* mkdir(2) with mode, special bits included. */
int mbfs_remote_mkdir(struct mbfs *fs, const char *path, unsigned mode,
		      bool *sure);
/* rename(2), replacing an existing destination (mv -fT) unless noreplace
 * (then -EEXIST): 0, or 1 when the two are one file (hard links; nothing
 * is done, as rename(2) does), or -errno. */
int mbfs_remote_rename(struct mbfs *fs, const char *from, const char *to,
		       bool noreplace, bool *sure);
/* chmod, special bits included. */
int mbfs_remote_chmod(struct mbfs *fs, const char *path, unsigned mode);
/* The mode of a file this mount has just PUT: through the chmod route (it
 * resolves the path as that PUT did; an ambiguous failure is repeated
 * once: the same mode twice is harmless), or mbfs_remote_chmod for
 * special bits. */
int mbfs_remote_chmod_new(struct mbfs *fs, const char *path, unsigned mode);
/* df of the mounted root, cached for about 5 s. */
int mbfs_remote_statfs(struct mbfs *fs, struct statvfs *out);

#endif
