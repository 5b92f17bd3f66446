/* guest.h: the guest ops of the exec strategy, and their reports.
 *
 * The scripts themselves are the files in shim/guest/ (read them there); this
 * module fills their arguments. A run lives in the guest directory
 * /tmp/.mbexec/RUNID (mode 0700), created by the one launch that starts the
 * command (the idempotency guard, so a retried launch only reports):
 *   cwd, cmd, mode, winsz, guard, orphan, late, ready   written by the launch
 *   started      the supervisor's run.sh took it (it starts a run once)
 *   pgid         the command's process group (it runs in its own session)
 *   out, err     its output (copied from the FIFOs out.p, err.p, at most
 *                16 MiB unread each; the bytes below ack are punched out);
 *                in (embedded stdin) or fifo + in.NNNNNN chunks
 *                + in.eof (streamed stdin, see stdin_exec.h); in.pos counts
 *                the chunks the guest feeder has consumed
 *   main         the main process's exit status ($?: 128+N for signal N)
 *   rc           the same, one write, once every writer of the output has
 *                closed it (late=nowait: at once)
 *   seen, ack    the offsets the client has (for --attach; for the pumps)
 *   result       a final one-line report (remote directory missing...)
 *   idle         seconds since the client's last poll or heartbeat, counted
 *                by the supervisor, which ends the command at `orphan`
 *   tty, ptypid  a pty run's terminal and the job leader in it
 *   term         a pty run's TERM (the client's, as ssh passes it)
 * A finished run keeps its files, so a lost answer can be fetched again by
 * repeating the same request; the client removes big ones, and the guest
 * supervisor removes finished runs after 10 to 20 minutes (KEEP, sup.sh).
 * Every report is ASCII (output is base64), so the UTF-8 decoding of exec
 * output cannot damage it. Nothing here does I/O.
 */
#ifndef MBX_GUEST_H
#define MBX_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MBX_RUN_BASE "/tmp/.mbexec"
#define MBX_RUNID_HEX 16              /* random hex chars in a run id */
/* Raw output bytes per report (stderr gets at most half); base64 keeps the
 * answer under the 1 MiB exec output cap. */
#define MBX_REPORT_RAW (640u * 1024)
/* A finished report at most this big is kept as "result" by the guest,
 * which then needs no cleanup request. */
#define MBX_RESULT_KEEP 49152u
/* A running command whose client has not polled (nor sent a heartbeat) for
 * this long is ended by its guest watchdog: mbexec was killed, or gave up.
 * Long enough to ride out a service stall: mbexec retries its polls for
 * two thirds of it (the reconnect window, 10 min), and one that gave up
 * has the rest to --attach. Tests and unusual setups may change it with
 * $MBEXEC_ORPHAN_SECONDS (>= 4). */
#define MBX_ORPHAN_S 900u
/* The client sends a heartbeat when it has not polled for this long. */
#define MBX_HEARTBEAT_MS 20000u
/* Stdin embedded in the launch when it ends within this many bytes. */
#define MBX_EMBED_STDIN 8192u

enum mbx_in_mode {
	MBX_IN_NULL,     /* /dev/null */
	MBX_IN_EMBED,    /* the bytes travel in the launch script */
	MBX_IN_STREAM,   /* a FIFO fed from uploaded chunk files */
	MBX_IN_PTY,      /* the same, into a pseudo-terminal (script(1)) */
};

struct mbx_launch {
	const char *run_id;
	const char *cwd;             /* remote directory */
	const char *script;          /* text for /bin/sh -lc, or NULL: */
	const char *script_path;     /* a guest file holding it (then deleted) */
	enum mbx_in_mode in_mode;
	const unsigned char *in_data; /* MBX_IN_EMBED */
	size_t in_len;
	unsigned wait_ms;            /* wait this long for the end */
	unsigned guard_s;            /* guest-side KILL after this (0: none) */
	unsigned orphan_s;           /* the watchdog's patience (MBX_ORPHAN_S) */
	unsigned cols, rows;         /* MBX_IN_PTY: the terminal size */
	bool no_wait_output;         /* end at the main process's exit, not
	                                when its output is closed */
	const char *term;            /* MBX_IN_PTY: $TERM for it, or NULL */
};

/* Append `var=VALUE` (a shell assignment, newline-terminated) for any
 * bytes: single-quoted when UTF-8, else decoded from base64 on the guest. */
int mbx_sh_assign(struct mb_buf *b, const char *var, const char *value);

/* Append the launch script to out. 0 or -ENOMEM/-E2BIG. */
int mbx_guest_launch(struct mb_buf *out, const struct mbx_launch *l);

/* Report output from offsets oo/eo, waiting up to wait_ms on the guest for
 * new output, the end, or (in_pos >= 0) in.pos to differ from in_pos. When
 * record is set (the main poll, not a read-ahead), the guest keeps oo/eo as
 * what the client has, for a later --attach. */
int mbx_guest_poll(struct mb_buf *out, const char *run_id, uint64_t oo,
		   uint64_t eo, long in_pos, unsigned wait_ms, bool record);

/* The same poll, in the parts a mount's shared poll (fuse/agent.c)
 * combines: prelude (the same for every run: sent once), setup, a ready
 * test (builtins only) and the body that prints the report. On success
 * the caller releases p (mbx_mux_parts_release). 0 or -ENOMEM. */
struct mbx_mux_parts {
	struct mb_buf prelude, setup, ready, body;
};
int mbx_guest_mux_poll(const char *run_id, uint64_t oo, uint64_t eo,
		       long in_pos, struct mbx_mux_parts *p);
void mbx_mux_parts_release(struct mbx_mux_parts *p);

/* Report from the offsets the last recorded poll had (mbexec --attach). */
int mbx_guest_attach(struct mb_buf *out, const char *run_id);

/* Signal the command's group: "INT", or "TERM" (then KILL after 2 s). */
int mbx_guest_signal(struct mb_buf *out, const char *run_id, const char *how);

/* Cut n pieces of 1 MiB of stdout from off into RUNDIR/piece.FIRST...
 * (six digits; bulk.c fetches them with GETs), removing pieces below keep
 * ("all": every piece). The bytes must exist already. */
#define MBX_PIECE_BYTES 1048576u
int mbx_guest_cut(struct mb_buf *out, const char *run_id, uint64_t off,
		  unsigned n, unsigned first, const char *keep);

/* Set a pty run's terminal size. */
int mbx_guest_resize(struct mb_buf *out, const char *run_id, unsigned cols,
		     unsigned rows);

/* Mark the client alive (it cannot poll now: stdout is blocked). */
int mbx_guest_heartbeat(struct mb_buf *out, const char *run_id);

/* Remove the run directory. */
int mbx_guest_cleanup(struct mb_buf *out, const char *run_id);

enum mbx_state {
	MBX_ST_RUNNING,
	MBX_ST_DONE,
	MBX_ST_GONE,     /* no run directory */
	MBX_ST_LOST,     /* guarded but never started (launch died midway) */
	MBX_ST_NOCWD,    /* the remote directory does not exist */
	MBX_ST_FAIL,     /* the guest cannot run us; why in fail */
	MBX_ST_OTHER,    /* signal/cleanup acknowledgement */
};

struct mbx_report {
	enum mbx_state state;
	int rc;                      /* MBX_ST_DONE */
	uint64_t out_size, err_size; /* sizes of out/err on the guest */
	long in_pos;                 /* chunks consumed by the guest reader */
	uint64_t out_off, err_off;   /* where the data below starts */
	unsigned char *out_data;     /* malloc'd (may be NULL when empty) */
	size_t out_len;
	unsigned char *err_data;
	size_t err_len;
	bool complete;               /* done and nothing more to fetch */
	char fail[64];
};

/* Parse the exec stdout holding a report. 0 or -EPROTO. On success rep owns
 * its buffers (mbx_report_release). */
int mbx_report_parse(const char *text, size_t len, struct mbx_report *rep);
void mbx_report_release(struct mbx_report *rep);

#endif
