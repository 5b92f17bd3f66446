/* mbexec.h: what the parts of mbexec share.
 *
 * main.c parses the options (options.c), finds the sandbox and the remote
 * directory (locate.c), builds a struct mbx_run and hands it to one execution
 * strategy (strategy.h). The pump (pump.c) owns the local side: output sinks,
 * the signal thread and the terminal. Only main() exits.
 */
#ifndef MBX_MBEXEC_H
#define MBX_MBEXEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/api.h"
#include "common/buf.h"
#include "common/ident.h"

#define MBX_PROG "mbexec"

/* Exit statuses of mbexec itself (everything else is the command's). */
#define MBX_EXIT_TIMEOUT 124
#define MBX_EXIT_USAGE 125
#define MBX_EXIT_FAIL 255

/* --json keeps at most this much of each stream. */
#define MBX_JSON_CAP (8u * 1024 * 1024)
/* A command that starts within this many seconds of the sandbox's hard
 * deadline gets a note on stderr saying how long it has left. */
#define MBX_DEADLINE_WARN_S 600
/* -t passes $TERM on when it is at most this long. */
#define MBX_TERM_MAX 256

enum mbx_mode { MBX_MODE_AUTO, MBX_MODE_EXEC, MBX_MODE_MANAGED };

/* Parsed and validated command line (options.c). Strings borrow argv or
 * the environment, except env[] entries, which are malloc'd. */
struct mbx_opts {
	const char *cwd;        /* -C DIR, or NULL */
	const char *mount;      /* --mount DIR, or NULL */
	const char *sh;         /* --sh SCRIPT, or NULL */
	char **argv;            /* the command (argc > 0) unless sh */
	int argc;
	char **env;             /* "NAME=VALUE", NULL-terminated */
	size_t nenv;
	int tty;                /* -1 not given, 0 -T, 1 -t */
	bool interactive;       /* -i */
	bool no_stdin;          /* -n */
	bool json;              /* --json */
	bool no_wait_output;    /* --no-wait-output */
	int verbose;            /* -v, repeatable */
	uint64_t timeout_ms;    /* --timeout; 0 none */
	enum mbx_mode mode;
	const char *key_file;   /* --key-file */
	const char *profile;    /* --profile, or NULL */
	const char *attach;     /* --attach RUN_ID, or NULL */
};

/* Parse argv into o. Returns -1 to go on, or an exit status (0 after
 * --help/--version, MBX_EXIT_USAGE with a message printed). */
int mbx_opts_parse(int argc, char **argv, struct mbx_opts *o);
void mbx_opts_release(struct mbx_opts *o);

/* Where to run (locate.c). */
struct mbx_target {
	struct mb_control control;      /* from the mount's control file */
	char mount_dir[MB_PATH_MAX];    /* local directory holding .mainbrella */
	char remote_cwd[MB_PATH_MAX];   /* absolute remote directory */
};

/* Resolve the mount and remote directory from o (cwd, -C, --mount).
 * Returns 0, or MBX_EXIT_USAGE with a message printed. */
int mbx_locate(const struct mbx_opts *o, struct mbx_target *t);

/* Before a command: make the mount push what it still holds (pending
 * metadata batches), so the command sees the local changes. 0; 1 when
 * the only files it could not put there were conflicts (the sandbox's
 * file changed since the mount's copy: each side's version is kept);
 * -EIO when the mount could not; a plain directory or an older mount is
 * 0. */
int mbx_sync_mount(const struct mbx_target *t);

/* Tell the mount that a command finished (its caches must go). Errors are
 * ignored: the mount may be gone, or the control file a plain file. */
void mbx_invalidate_mount(const struct mbx_target *t);

/* When the mount carries what an ended mount of its cache did not send
 * (its control file's "unsent") and no command has said so yet: notes on
 * stderr, and the mount is told they were given (shim/unsent.c). */
void mbx_warn_unsent(const struct mbx_target *t);

/* An output destination: a local fd (streamed) or a capture buffer. */
struct mbx_sink {
	int fd;                 /* 1 or 2 */
	bool capture;           /* --json: keep in buf instead of writing */
	struct mb_buf buf;      /* capture (max MBX_JSON_CAP) */
	bool truncated;         /* capture overflowed */
	bool broken;            /* the fd gave EPIPE */
	uint64_t bytes;         /* total bytes delivered */
};

/* What the signal thread asks a strategy to do. */
enum mbx_action {
	MBX_ACT_NONE = 0,
	MBX_ACT_INTERRUPT,      /* forward SIGINT */
	MBX_ACT_TERMINATE,      /* TERM, then KILL the remote command */
	MBX_ACT_RESIZE,         /* the local window changed */
};

struct mbx_strategy;

/* One command run. Filled by main(); strategies keep their state in priv.
 * Fields under "protected by lock" are shared with the signal thread. */
struct mbx_run {
	const struct mbx_opts *opts;
	const struct mbx_target *target;
	const struct mbx_strategy *strategy;
	struct mb_client *client;
	struct mb_ident ident;
	const char *api_url;
	char *script;            /* shell text run by /bin/sh -c (env + command) */
	char *script_exec;       /* the same, an argv run with `exec` when it can */
	bool forward_stdin;      /* local stdin goes to the command */
	bool stdin_tty;          /* stdin is a terminal */
	bool pty;                /* run in a pseudo-terminal */
	const char *term;        /* pty: the local $TERM to pass on, or NULL */
	const char *attach_id;   /* --attach: follow this run, start nothing */
	uint64_t t0_ms;          /* mb_now_ms() at start */
	uint64_t end_ms;         /* mb_now_ms() when the command was over */
	uint64_t deadline_ms;    /* 0: no --timeout */

	struct mbx_sink out, err;

	/* results, set by the strategy's wait() */
	int status;              /* exit status to report */
	int term_signal;         /* N when the command died of signal N, else 0 */
	bool timed_out;
	char remote_id[64];      /* run id (exec) or job id (managed) */
	bool threads_left;       /* a helper thread could not be joined */

	pthread_mutex_t lock;
	/* protected by lock: */
	bool started;            /* strategy accepts signal() calls */
	bool finished;           /* no more signal() calls wanted */
	enum mbx_action pending; /* arrived before started */
	int pending_signo;
	bool resize_pending;      /* a window change came before the start */
	int terminated_by;       /* our signal that made us end the command */
	bool silent;             /* the sandbox stopped answering (strategy) */
	uint64_t key_int_ms;     /* a -t Ctrl-C key went to the sandbox then,
	                            before it was known silent, and its stdin
	                            chunk key_chunk is not there yet
	                            (pump.c) */
	long key_chunk;
	bool abandoned;          /* a signal gave up on it (pump.h) */
	int abandoned_by;        /* that signal */
	void *priv;              /* the strategy's state */
};

#endif
