/* strategy.h: the interface every execution strategy implements.
 *
 * Like redis' ae.c back ends, main() picks one table and calls it in order:
 * start() once; if it returned 0, wait() once; finish() always. signal() may
 * be called from the signal thread at any time between a successful start()
 * and the end of wait() (serialised by run->lock being released only after
 * the call is queued, never concurrently with itself).
 *
 *   exec     a detached guest process driven by short foreground execs
 *            (strat_exec.c); the default: nothing is retained by the service.
 *   managed  a managed execution (strat_managed.c): PTY, live terminal stdin.
 */
#ifndef MBX_STRATEGY_H
#define MBX_STRATEGY_H

#include "shim/mbexec.h"

struct mbx_strategy {
	const char *name;       /* "exec" | "managed": --json "strategy" */
	/* Start the command. 0, or an exit status with the message printed
	 * (MBX_EXIT_USAGE: nothing sent; MBX_EXIT_FAIL: says whether the
	 * command may have run). */
	int (*start)(struct mbx_run *r);
	/* Pump output/stdin until the command ended; set r->status,
	 * r->term_signal, r->timed_out. 0, or an exit status (as start). */
	int (*wait)(struct mbx_run *r);
	/* Act on a local signal (any thread; may block on the network). */
	void (*signal)(struct mbx_run *r, enum mbx_action a, int signo);
	/* Release remote and local state; always called once. */
	void (*finish)(struct mbx_run *r);
};

extern const struct mbx_strategy mbx_strategy_exec;
extern const struct mbx_strategy mbx_strategy_managed;

#endif
