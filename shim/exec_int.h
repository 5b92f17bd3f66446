/* exec_int.h: the exec strategy's own state, shared by strat_exec.c (the
 * launch and the poll loop) and exec_aux.c (guest calls, heartbeat,
 * read-ahead). Not for other modules.
 */
#ifndef MBX_EXEC_INT_H
#define MBX_EXEC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "shim/guest.h"
#include "shim/mbexec.h"

#define MBX_LAUNCH_TIMEOUT_MS 20000
#define MBX_POLL_TIMEOUT_MS 30000
#define MBX_SIGNAL_TIMEOUT_MS 15000
/* The guest long-poll's bound: it blocks (lib.sh, wait_any) and wakes at
 * once on output or the end, so a longer one costs nothing but an operation
 * of the sandbox's 4 held (one per mount when polls share the mount's);
 * at most a fifth of the watchdog's patience, as it counts from the poll's
 * start. */
#define MBX_POLL_WAIT_MS 15000
#define MBX_LAUNCH_WAIT_SHARED_MS 300 /* the launch's wait with a mount's
                                         shared polls to go on with */
#define MBX_LOST_S 60               /* no answer this long: give up (255) */
#define MBX_WAIT_NOTICE_MS 5000     /* retrying this long is said on stderr */
#define MBX_SILENT_MS 5000          /* no answer this long is said at once */
#define MBX_PROBE_MS 2000           /* while a request waits, ask the
                                       service this often whether it is
                                       there (exec_aux.c, probe_main) */
#define MBX_MUX_SLACK_MS 10000      /* the mount's poll answers within its
                                       wait and this; else poll directly */

struct mbx_exec_state {
	char run_id[MBX_RUNID_HEX + 1];
	char run_dir[64];
	enum mbx_in_mode in_mode;
	unsigned char *pre;          /* probed stdin */
	size_t prelen;
	bool pre_eof;
	struct mbx_uploader *up;
	int up_error;                /* -errno: stdin could not be forwarded at all */
	uint64_t out_off, err_off;   /* bytes delivered so far */
	uint64_t out_size, err_size; /* sizes in the last report */
	bool done;                   /* rc known */
	bool complete;               /* and all output delivered */
	int rc;
	bool term_sent;              /* the main thread ended the command */
	int mux_fd;                  /* the mount's socket (mux.h), or -1 */
	bool mux_off;                /* no usable mount socket: poll directly */
	bool bulk_off;               /* bulk GETs failed once: polls only */
	bool broken_pipe;
	struct mbx_run *r;
	/* heartbeat and watchdog threads (see heartbeat_main, watch_main) */
	pthread_t hb_th, wd_th;
	bool hb_started, wd_started;
	pthread_mutex_t hb_mu;
	pthread_cond_t hb_cv;
	uint64_t last_contact;       /* protected by hb_mu */
	uint64_t waiting_since;      /* protected by hb_mu: a request with no
	                                answer since then (0: none) */
	bool launched;               /* protected by hb_mu: the run exists */
	bool told_silent;            /* protected by hb_mu */
	bool lost;                   /* protected by hb_mu: gave up */
	bool hb_stop;                /* protected by hb_mu */
	pthread_t pr_th;             /* the probe (probe_main) */
	bool pr_started;
	uint64_t alive_at;           /* protected by hb_mu: the service last
	                                answered anything, a probe too */
	uint64_t probe_sent;         /* protected by hb_mu: the last probe */
};

#define MBX_AHEAD_MAX 2

/* One read-ahead poll (exec_aux.c). */
struct mbx_ahead {
	struct mbx_run *r;
	const char *run_id;
	uint64_t off;
	struct mbx_report rep;
	int e;
	pthread_t th;
};

/* Seconds the guest watchdog waits for a sign of life ($MBEXEC_ORPHAN_SECONDS
 * or MBX_ORPHAN_S). */
unsigned mbx_orphan_seconds(void);

/* Milliseconds without an answer after which mbexec gives up on the
 * sandbox ($MBEXEC_LOST_SECONDS or MBX_LOST_S). */
uint64_t mbx_lost_ms(void);

/* Run a guest script and parse its report. Transport faults, 5xx and
 * unreadable answers are retried for up to mbx_lost_ms() when retry is set
 * (the script must be idempotent); no attempt runs past that. *reached
 * (may be NULL) says whether any attempt may have reached the guest. 0 or
 * -errno with err filled (its message without the binding's "cannot run
 * the command: "); -ECANCELED once mbexec gave up; any thread. */
int mbx_guest_call(struct mbx_run *r, const struct mb_buf *script,
		   long timeout_ms, bool retry, struct mbx_report *rep,
		   bool *reached, struct mb_err *err);
/* The same for a poll that waits up to wait_ms on the guest: its budget
 * (mbx_lost_ms) counts from the end of that wait. */
int mbx_guest_poll_call(struct mbx_run *r, const struct mb_buf *script,
			long timeout_ms, unsigned wait_ms, struct mbx_report *rep,
			struct mb_err *err);

/* The launch: mbx_guest_call (retried, MBX_LAUNCH_TIMEOUT_MS) that also
 * hands the login shell's exported variables to the script (MBX_ENV, see
 * mb_exec_clean), for the user's command. */
int mbx_guest_launch_call(struct mbx_run *r, const struct mb_buf *script,
			  struct mbx_report *rep, bool *reached, struct mb_err *err);

/* Write the part of data (which starts at stream offset off_in) beyond *off
 * to s and advance *off. 0, -EPROTO on a gap, -EPIPE when stdout closed. */
int mbx_deliver(struct mbx_run *r, struct mbx_sink *s, uint64_t *off,
		uint64_t off_in, const unsigned char *data, size_t len);

/* The guest answered: the heartbeat is not needed for a while, and the
 * watchdog's count of silence starts again. */
void mbx_contact(struct mbx_exec_state *st);
/* The main thread waits for an answer from now (unless it already did). */
void mbx_waiting(struct mbx_exec_state *st);
/* The same for a request that waits up to ms on the guest before it
 * answers: the silence counts from then. */
void mbx_waiting_for(struct mbx_exec_state *st, unsigned ms);
/* The watchdog gave up on the sandbox (every request was cancelled). */
bool mbx_lost(struct mbx_exec_state *st);
/* When mbexec gave up on the sandbox (the run was abandoned, pump.h, or
 * the watchdog gave up): say so, with the way back for a command that s
 * says may be running, and return MBX_EXIT_FAIL; else 0. */
enum mbx_started { MBX_NOT_STARTED, MBX_MAYBE_STARTED, MBX_STARTED };
int mbx_gave_up(struct mbx_run *r, struct mbx_exec_state *st, enum mbx_started s);

/* Start (0 or -errno) and stop (joins) the heartbeat thread. */
int mbx_heartbeat_start(struct mbx_run *r, struct mbx_exec_state *st);
void mbx_heartbeat_stop(struct mbx_exec_state *st);
/* The watchdog: once nothing has answered for MBX_SILENT_MS while mbexec
 * waits, says so on stderr (once, with the --attach line), and again when
 * the sandbox answers; after mbx_lost_ms() it gives up (mbx_lost) and
 * cancels every request. Start (0 or -errno) and stop (joins). */
int mbx_watch_start(struct mbx_run *r, struct mbx_exec_state *st);
void mbx_watch_stop(struct mbx_exec_state *st);

/* Start up to MBX_AHEAD_MAX polls of the stdout ranges after the one the main
 * poll fetches, when that much is waiting; returns how many. */
size_t mbx_ahead_start(struct mbx_run *r, struct mbx_exec_state *st, struct mbx_ahead *v);
/* Join them; deliver (when deliver_them) what continues stdout. */
void mbx_ahead_finish(struct mbx_run *r, struct mbx_exec_state *st,
		      struct mbx_ahead *v, size_t n, bool deliver_them);

#endif
