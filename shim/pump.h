/* pump.h: the local side of a run: output sinks, signals, the terminal.
 *
 * Output: bytes go to fd 1 and 2 as they are (or into --json buffers).
 * Signals: SIGINT, SIGTERM, SIGHUP and SIGWINCH are blocked in every thread
 * and taken by one signal thread (sigwait), which turns them into actions
 * for the strategy, made by a second thread: no work is done in a signal
 * handler, and a signal is seen at once even while the strategy's call for
 * the one before waits for the sandbox. When the sandbox does not answer
 * (an interrupt unacted on for MBX_ESCAPE_MS, or the strategy said it is
 * silent), a second Ctrl-C, or a SIGTERM or SIGHUP, abandons the run:
 * every request ends at once (mb_api_cancel_all) and the strategy returns
 * MBX_EXIT_FAIL, saying the command may still run. SIGPIPE is ignored;
 * a closed stdout shows up as EPIPE in mbx_sink_write().
 * Terminal: raw mode for -t, restored on every exit path that runs exit().
 */
#ifndef MBX_PUMP_H
#define MBX_PUMP_H

#include <stddef.h>

#include "shim/mbexec.h"

void mbx_sink_init(struct mbx_sink *s, int fd, bool capture);
void mbx_sink_release(struct mbx_sink *s);

/* Deliver n bytes. 0, or -EPIPE when the reader of fd went away (s->broken
 * is set and later writes are dropped), or -errno. Capture never fails:
 * what does not fit is dropped and s->truncated set. */
int mbx_sink_write(struct mbx_sink *s, const void *p, size_t n);

/* Block the handled signals in the calling thread (call before any other
 * thread exists, so all inherit the mask) and start the signal thread for r.
 * 0 or -errno. */
int mbx_signals_start(struct mbx_run *r);

/* The strategy can take signal() calls from now on: deliver what arrived
 * before (called by the strategy's start() once the command exists). */
void mbx_signals_ready(struct mbx_run *r);

/* The action that arrived before the command started (MBX_ACT_NONE if
 * none), with its signal in *signo: main() gives up before sending. */
enum mbx_action mbx_signals_early(struct mbx_run *r, int *signo);

/* A second Ctrl-C gives up on a sandbox whose answer to the first has not
 * come for this long (2.5 s more when it was ending the command). */
#define MBX_ESCAPE_MS 1000

/* The strategy's view: the sandbox has stopped answering (silent), or
 * answers again. True when that gave up on the run at once (a SIGTERM,
 * SIGHUP or second Ctrl-C was waiting): nothing more to say. */
bool mbx_signals_silent(struct mbx_run *r, bool silent);
/* Call after saying the silence: a Ctrl-C that waits, or a -t Ctrl-C key
 * whose stdin chunk the sandbox never took (mbx_signals_keys_sent), counts
 * as the first, and the hint says so. */
void mbx_signals_said_silent(struct mbx_run *r);

/* Bytes a -t run read from the raw local terminal: while the sandbox is
 * silent, a Ctrl-C among them is also taken as the local SIGINT (raw mode
 * made it a byte for the remote program, which cannot get it now), so
 * that Ctrl-C twice gives up there too. */
void mbx_signals_keys(struct mbx_run *r, const void *p, size_t n,
		      long chunk);
/* The stdin chunk chunk is on the sandbox: a -t Ctrl-C key in it went
 * through (chunk: the index mbx_signals_keys was given). */
void mbx_signals_keys_sent(struct mbx_run *r, long chunk);

/* The signal that abandoned the run, or 0. */
int mbx_signals_abandoned(struct mbx_run *r);

/* No more signal() calls: waits for one in progress to return. Signals
 * arriving afterwards are ignored (mbexec is about to exit). */
void mbx_signals_stop(struct mbx_run *r);

/* Sleep up to ms, returning early (1) once mbx_signals_stop() was called. */
int mbx_signals_sleep(struct mbx_run *r, unsigned ms);

/* Put the terminal on fd in raw mode; restored by mbx_term_restore(), which
 * also runs at exit(). 0 or -errno. */
int mbx_term_raw(int fd);
void mbx_term_restore(void);

/* The window size of the first terminal among fds 0, 1, 2; 80x24 if none. */
void mbx_term_size(int *cols, int *rows);

#endif
