/* api.h: typed bindings for the Mainbrella container API.
 *
 * The only code that knows routes and JSON field names. Built on libcurl
 * (connection reuse, one handle per thread, CURLOPT_NOSIGNAL, no Origin
 * header, percent-encoded query values) and cJSON (unknown fields ignored,
 * malformed answers rejected with EPROTO and a clear message).
 *
 * Every function returns 0 or -errno and fills *err on failure (err.h);
 * out-parameters are written only on success. All functions are safe to
 * call from several threads at once on one struct mb_client.
 *
 * Retries (contract §7.1), done here so callers never see them:
 *  - 429 execution_limit: always retried with jittered back-off 250 ms..5 s
 *    (nothing was started), for every route, mutations included;
 *  - idempotent reads (file GET, list, stat, job get/list, export, container
 *    list): transport errors and 5xx retried with capped back-off;
 *  - a list page answered 403 file_access_denied is asked again up to twice
 *    (short back-off): the runtime fails a whole page when an entry vanishes
 *    while it is listed (contract §9.5); a lasting 403 is returned as such;
 *  - mutations (PUT, mkdir, remove, move, chmod, exec, DELETE container,
 *    stdin POST) are never retried blindly: a transport fault after sending
 *    or a 503 returns the error with err->ambiguous = 1 so the caller can
 *    reconcile;
 *  - job create is retried with the same Idempotency-Key and body on
 *    transport errors and 503 (same generation only).
 * Each request that uses the container's operation pool (exec, file GET/PUT,
 * metadata, export, job create) holds a limiter slot (limiter.h) while in
 * flight. Total time per call is bounded by opts.op_timeout_ms (waiting for
 * a slot included), except where the server needs longer: one exec attempt
 * may take its command timeout + 15 s, container create 130 s, export
 * 150 s; mb_job_follow gives up after op_timeout_ms without any frame.
 * mb_op_deadline() bounds every call of a thread further, exec included;
 * mb_fs_list_all bounds the whole listing by op_timeout_ms.
 */
#ifndef MB_API_H
#define MB_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "err.h"
#include "ident.h"

#define MB_MAX_FILE_BYTES 1048576u
#define MB_MAX_LIST_ENTRIES 1000u
#define MB_MAX_COMMAND_BYTES 16384u
#define MB_MAX_EXEC_BODY_BYTES 32768u   /* JSON body of exec; more is 413 */
#define MB_MAX_EXEC_TIMEOUT_MS 60000L
#define MB_MAX_JOB_TIMEOUT_MS 900000L
#define MB_MAX_STDIN_CHUNK 65536u
#define MB_MAX_STDIN_TOTAL 1048576u
#define MB_MAX_RETAINED_JOBS 32

struct mb_client;

struct mb_client_opts {
	const char *api_url;        /* base URL, no trailing '/' (cred.h) */
	const char *api_key;        /* copied; wiped on free */
	long connect_timeout_ms;    /* default 10000 when 0 */
	long op_timeout_ms;         /* total time for one call incl. retries;
	                               default 60000 when 0 */
	bool log_requests;          /* log each HTTP attempt at MB_LOG_INFO
	                               (method, route, status, time): -v */
	bool use_limiter;           /* take machine-wide slots: set it true;
	                               false only in tests of the 429 path */
};

int mb_client_new(const struct mb_client_opts *opts, struct mb_client **out,
		  struct mb_err *err);
void mb_client_free(struct mb_client *c);

/* Bound every call this thread makes from now on by deadline_ms (the
 * mb_now_ms() clock), on top of each call's own budget: a call gives up at
 * the deadline, and one made after it fails at once with ETIMEDOUT without
 * sending anything. 0 lifts the bound. Returns the previous bound, so an
 * operation made of many calls (a chunked upload, its retries) restores it
 * when it ends. Per thread: helper threads set their own. */
uint64_t mb_op_deadline(uint64_t deadline_ms);

/* The same, but never later than the bound already set (0: none): a step
 * inside an operation narrows its deadline and never extends it. Returns
 * the previous bound, to restore with mb_op_deadline(). */
uint64_t mb_op_narrow(uint64_t deadline_ms);

/* This thread's bound (0: none), e.g. for a helper thread that works for
 * the same operation and sets it for itself. */
uint64_t mb_op_current(void);

/* True when this thread has a bound and it has passed. */
bool mb_op_expired(void);

/* When (mb_now_ms()) a call through c that renews a container's idle
 * deadline last succeeded: exec, file GET/PUT, metadata and job create,
 * not export or GETs of /containers (contract §2.2). 0 when none yet.
 * Covers every container c talked to. Thread-safe. */
uint64_t mb_client_last_renew_ms(struct mb_client *c);

/* Global init/cleanup (curl_global_*); call once from main(). */
int mb_api_global_init(void);
void mb_api_global_cleanup(void);

/* Give up on the service: every call of the process in flight or waiting
 * for a limiter slot ends within about a second, and every later one at
 * once, with -ECANCELED (never retried; ambiguous as any request cut off
 * after it was sent). For
 * a program about to exit; there is no undo. Any thread. */
void mb_api_cancel_all(void);
bool mb_api_cancelled(void);

/* ---- containers ---- */

struct mb_container {
	char id[MB_ID_MAX];
	char created_at[MB_GEN_MAX];
	char status[16];           /* "running" | "starting" */
	char expires_at[MB_GEN_MAX];  /* hard deadline; "" when not reported */
	char size[16];
	/* the image, for people: each "" when not reported; cut to fit */
	char catalog_id[32];       /* "node", ... */
	char image_id[64];         /* an owned custom image */
	char image_name[96];       /* "Node 24 + TypeScript" */
	long long idle_timeout_ms; /* the account's limits.idleTimeoutMs (the
	                              same for every entry); 0 when absent */
};

/* GET /containers. *out is a malloc'd array of *n entries (free()). */
int mb_containers_list(struct mb_client *c, struct mb_container **out,
		       size_t *n, struct mb_err *err);

/* Look up slot id in the list; -ENOENT with a clear message when not
 * running. */
int mb_container_find(struct mb_client *c, const char *id,
		      struct mb_container *out, struct mb_err *err);

/* The hard deadline of generation who (id and createdAt), from one
 * GET /containers (which does not renew idle time). Activity never moves
 * it, so one look per generation is enough. 0 with out set to expiresAt as
 * the service wrote it ("2026-10-05T13:00:00.000Z") and *sec (may be NULL)
 * to the same time in Unix seconds; -ENOENT when that generation is not
 * running (stopped, expired, or its slot runs another one); -EPROTO when
 * its entry has no usable expiresAt. */
int mb_container_expires_at(struct mb_client *c, const struct mb_ident *who,
			    char out[MB_GEN_MAX], time_t *sec,
			    struct mb_err *err);

struct mb_create_req {
	const char *catalog_id;    /* NULL: server default */
	const char *size;          /* NULL: "lite" */
	const char *idempotency_key; /* required by our callers */
};

struct mb_creation {
	char creation_id[64];
	char container_id[MB_ID_MAX];
	char created_at[MB_GEN_MAX];
	char status[16];           /* "starting" | "running" | "stopped" */
};

/* One POST /containers attempt (no retry: the caller loops with the same
 * key on -EAGAIN, which is returned for transport errors, any 5xx, a 429
 * other than a monthly quota, and creation.status "starting"; for
 * "starting" *out is filled too).
 * 409 creation_no_longer_running gives -ESTALE with *out filled. A NULL
 * idempotency_key gets a random one (then a retry cannot be matched). */
int mb_container_create(struct mb_client *c, const struct mb_create_req *req,
			struct mb_creation *out, struct mb_err *err);

/* DELETE /containers?id=&createdAt= (always both). */
int mb_container_delete(struct mb_client *c, const struct mb_ident *who,
			struct mb_err *err);

/* ---- files ---- */

/* GET a file of at most 1 MiB into out (appended; out->max should allow
 * 1 MiB). Symlinks followed. */
int mb_file_get(struct mb_client *c, const struct mb_ident *who,
		const char *path, struct mb_buf *out, struct mb_err *err);

/* PUT len bytes (<= 1 MiB) as the whole file: atomic replace on the guest;
 * new files are 0600, existing files keep their mode. */
int mb_file_put(struct mb_client *c, const struct mb_ident *who,
		const char *path, const void *data, size_t len,
		struct mb_err *err);

enum mb_ftype {
	MB_FT_FILE, MB_FT_DIR, MB_FT_SYMLINK, MB_FT_FIFO, MB_FT_SOCKET,
	MB_FT_CHAR, MB_FT_BLOCK, MB_FT_OTHER,
};

struct mb_entry {
	char *name;                /* malloc'd */
	char *link_target;         /* malloc'd, NULL unless MB_FT_SYMLINK */
	enum mb_ftype type;
	uint64_t size;
	unsigned mode;             /* mode & 07777 */
	unsigned uid, gid;
	time_t mtime;              /* whole seconds */
	long mtime_nsec;           /* 0 from the API's routes (whole
				    * seconds); a guest-run listing's */
	bool mtime_exact;          /* a guest-run listing's: mtime_nsec
				    * is known, also when 0 */
	bool name_cut;             /* the name as sent held a NUL byte
				    * ("\u0000"): name is what came before it */
};

void mb_entry_release(struct mb_entry *e);

struct mb_entry_list {
	struct mb_entry *v;
	size_t n;
};

void mb_entry_list_release(struct mb_entry_list *l);

/* One page of GET /containers/files/list (limit 1..1000). *next_offset is
 * -1 when nothing follows. The entries are as the service sent them, in
 * its order: which names a directory can hold is the caller's rule
 * (name_cut marks a name that held a NUL byte). */
int mb_fs_list(struct mb_client *c, const struct mb_ident *who,
	       const char *path, unsigned limit, unsigned long offset,
	       struct mb_entry_list *out, long *next_offset, struct mb_err *err);

/* All pages (1000 entries each), following nextOffset (a name may be on
 * two pages of a directory that changes meanwhile): within
 * op_timeout_ms for the whole listing, and never past the offset window of
 * the API (1000000): a nextOffset that never ends is an error (EPROTO or
 * ETIMEDOUT), not an endless loop. */
int mb_fs_list_all(struct mb_client *c, const struct mb_ident *who,
		   const char *path, struct mb_entry_list *out,
		   struct mb_err *err);

int mb_fs_stat(struct mb_client *c, const struct mb_ident *who,
	       const char *path, bool follow_symlinks, struct mb_entry *out,
	       struct mb_err *err);

/* mode: permission bits (0..0777). */
int mb_fs_mkdir(struct mb_client *c, const struct mb_ident *who,
		const char *path, bool recursive, unsigned mode,
		struct mb_err *err);
int mb_fs_remove(struct mb_client *c, const struct mb_ident *who,
		 const char *path, bool recursive, struct mb_err *err);
/* Never overwrites: an existing destination gives -EEXIST. */
int mb_fs_move(struct mb_client *c, const struct mb_ident *who,
	       const char *src, const char *dst, struct mb_err *err);
int mb_fs_chmod(struct mb_client *c, const struct mb_ident *who,
		const char *path, unsigned mode, struct mb_err *err);

/* ---- foreground exec (not idempotent, never retried but for 429) ---- */

struct mb_exec_result {
	char *out;                 /* malloc'd stdout text (UTF-8), NUL-terminated */
	size_t out_len;
	char *errout;              /* malloc'd stderr text */
	size_t err_len;
	int exit_code;             /* valid when has_exit_code */
	bool has_exit_code;
	bool timed_out;
	bool output_truncated;
};

void mb_exec_result_release(struct mb_exec_result *r);

/* Bytes the n bytes of s take inside a JSON string as mb_exec sends it:
 * '"', '\\' and control characters are escaped (2 or 6 bytes). Additive
 * over concatenation, so a script can be measured piece by piece. */
size_t mb_exec_text_bytes(const char *s, size_t n);

/* Bytes of the JSON body mb_exec sends for command (any timeout). */
size_t mb_exec_body_bytes(const char *command);

/* 1 when mb_exec can send command: at most MB_MAX_COMMAND_BYTES bytes and
 * a body of at most MB_MAX_EXEC_BODY_BYTES (a 16 KiB command whose escapes
 * double it would get 413, contract §9.6). */
bool mb_exec_fits(const char *command);

/* A clean shell for our own scripts. Every exec is `/bin/sh -lc CMD` (a
 * login shell, contract §3): the sandbox's /etc/profile and ~/.profile run
 * first and may put their own `find`, `tar`, `base64`... first in PATH,
 * export ENV, BASH_ENV, LD_PRELOAD or bash functions, or define aliases.
 * So CMD is this one fixed line, and the script runs in a shell that has
 * none of that:
 *
 *   [MBX_ENV=$(\export -p) || \exit 126;]
 *   \unset -v LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT || \exit 126;
 *   \exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
 *     [MBX_ENV="$MBX_ENV"] /bin/sh -c 'printf MARK; printf MARK >&2; ''SCRIPT'
 *
 * (one line; MARK is "\036mb\n", see mb_exec_clean_take). Why each word holds, in dash and in bash started as sh:
 * `exec`, `unset`, `exit` and `export` are special builtins, found before functions (dash refuses a
 * function of that name outright; bash as sh is in POSIX mode once the
 * profile has run, whatever the profile set); the backslash quotes the word,
 * so no alias applies; the line expands nothing outside double quotes, so
 * IFS, noglob and nounset do not matter; absolute paths ignore PATH; env -i
 * leaves out every exported variable and bash's exported functions, the
 * unset keeps a preloaded library out of env itself (a read-only one ends
 * the line: nothing runs rather than something planted), and the new shell is not a login one, so no profile runs again. With
 * MB_EXEC_KEEP_ENV the login shell's exported variables travel as text in
 * MBX_ENV (what a user's command should see, never evaluated by our
 * scripts). What this cannot stop: a profile that replaces the shell
 * itself, or bash as /bin/sh with `enable -n exec` (no word of bash is safe
 * from that); Debian's /bin/sh is dash.
 * Quoting grows the script ('\'' for each '), so size it with
 * mb_exec_clean_fits. */
#define MB_EXEC_KEEP_ENV 1u

/* Append the clean-shell command for script to *out (flags: 0 or
 * MB_EXEC_KEEP_ENV). 0 or -errno; on failure *out is unchanged. */
int mb_exec_clean(struct mb_buf *out, const char *script, unsigned flags);

/* The result of a command made by mb_exec_clean, without what the
 * sandbox's login shell printed before the script began (its profile's
 * banner, or a hostile profile's fake output), which the script's first
 * words mark. false when stdout holds no mark: the script never ran (the
 * profile exited, or ran something else); stdout is then emptied, stderr
 * kept as the shell left it. */
bool mb_exec_clean_take(struct mb_exec_result *r);

/* mb_exec_fits for the command mb_exec_clean makes of script. */
bool mb_exec_clean_fits(const char *script, unsigned flags);

/* POST /containers/exec: runs `/bin/sh -lc command` with closed stdin.
 * timeout_ms 1..60000 (0: server default 30000). */
int mb_exec(struct mb_client *c, const struct mb_ident *who,
	    const char *command, long timeout_ms, struct mb_exec_result *out,
	    struct mb_err *err);

/* ---- managed executions ---- */

struct mb_job_req {
	const char *command;             /* exactly one of command / argv */
	const char *const *argv;         /* NULL-terminated */
	long timeout_ms;                 /* 0: default 30000; max 900000 */
	bool stdin_enabled;
	const char *cwd;                 /* NULL: default */
	const char *const *env;          /* NULL-terminated "NAME=VALUE" */
	int pty_cols, pty_rows;          /* both > 0: run in a PTY */
	const char *idempotency_key;     /* required */
};

struct mb_job {
	char id[40];
	char status[20];   /* starting running succeeded failed timed_out
	                      output_limit canceled interrupted */
	char started_at[MB_GEN_MAX];
	long long retain_until_ms;       /* Unix ms */
	long cursor;
	long long output_bytes;
	int exit_code;
	bool has_exit_code;
	bool timed_out;
	bool output_truncated;
	bool stdin_enabled, stdin_closed;
	long long stdin_bytes;
};

/* 1 when status is terminal. */
bool mb_job_is_terminal(const struct mb_job *j);

/* Create, retrying with the same key and body on transport errors and 503.
 * 429 execution_history_limit gives -EUSERS with the code set. */
int mb_job_create(struct mb_client *c, const struct mb_ident *who,
		  const struct mb_job_req *req, struct mb_job *out,
		  struct mb_err *err);

/* GET one; stdout/stderr (optional, may be NULL) receive the retained
 * output text. */
int mb_job_get(struct mb_client *c, const struct mb_ident *who,
	       const char *eid, struct mb_job *out, struct mb_buf *stdout_out,
	       struct mb_buf *stderr_out, struct mb_err *err);

/* List this generation's retained jobs; *out malloc'd array (free()). */
int mb_job_list(struct mb_client *c, const struct mb_ident *who,
		struct mb_job **out, size_t *n, struct mb_err *err);

int mb_job_cancel(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, struct mb_err *err);

/* POST len (<= 65536) bytes of stdin. A 429 stdin_limit (pending) is waited
 * out and the same chunk resent; a 503 stdin_unavailable counts as sent
 * (the bytes are counted by the server and must not be replayed). */
int mb_job_stdin(struct mb_client *c, const struct mb_ident *who,
		 const char *eid, const void *data, size_t len,
		 struct mb_err *err);
/* DELETE stdin (EOF). A 409 stdin_closed counts as success. */
int mb_job_stdin_close(struct mb_client *c, const struct mb_ident *who,
		       const char *eid, struct mb_err *err);

/* sig: "SIGINT" | "SIGTERM" | "SIGKILL". 409 execution_not_running counts
 * as success for SIGKILL. */
int mb_job_signal(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, const char *sig, struct mb_err *err);
int mb_job_resize(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, int cols, int rows, struct mb_err *err);

enum mb_job_event_kind {
	MB_JOB_EV_STDOUT = 1,
	MB_JOB_EV_STDERR = 2,
	MB_JOB_EV_HEARTBEAT = 3,  /* comment line or reconnect; no data */
	MB_JOB_EV_STATUS = 4,     /* job holds the status frame */
};

struct mb_job_event {
	enum mb_job_event_kind kind;
	long seq;                 /* output events: the sequence (= SSE id) */
	const char *data;         /* output text, UTF-8, not NUL-terminated */
	size_t len;
	const struct mb_job *job; /* STATUS only */
};

/* Return 0 to go on, non-zero to stop following (that value is returned). */
typedef int (*mb_job_event_fn)(const struct mb_job_event *ev, void *ud);

/* Follow GET .../events from *cursor until a terminal status frame:
 * reconnects after the 30 s rotation or a dropped connection with
 * ?cursor=<last id>, delivers each sequence exactly once, in order, and keeps
 * *cursor at the last delivered sequence. The callback also runs about once
 * a second (heartbeats) so the caller can check its own deadlines.
 * The callback may itself call this API (it then uses its own connection).
 * Returns 0 after the terminal status (final state in *final, may be NULL),
 * the callback's non-zero value if it stopped, or -errno. */
int mb_job_follow(struct mb_client *c, const struct mb_ident *who,
		  const char *eid, long *cursor, mb_job_event_fn fn, void *ud,
		  struct mb_job *final, struct mb_err *err);

/* ---- export ---- */

/* GET /containers/export, writing the gzip bytes to fd. */
int mb_export(struct mb_client *c, const struct mb_ident *who, int fd,
	      struct mb_err *err);

#endif
