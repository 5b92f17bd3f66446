/* mux.h: polling a run through the mount's socket (common/agent.h), which
 * sends the polls of every running command on this machine in one exec
 * (fuse/agent.h says why). Used by the exec strategy for its long polls;
 * without a reachable mount it polls by itself.
 */
#ifndef MBX_MUX_H
#define MBX_MUX_H

#include <stdint.h>

#include "common/err.h"
#include "shim/guest.h"
#include "shim/mbexec.h"

/* One long poll of run_id through the mount named in r's control file.
 * *fd is the connection (-1: connect first; closed and set to -1 on a
 * fault). 0 with rep filled (release it); -ENOTCONN when the mount offers
 * no socket or it failed (poll by yourself from now on); other -errno with
 * err filled when the mount's request failed (the same errors as a poll of
 * one's own), or when the mount did not answer within wait_ms +
 * MBX_MUX_SLACK_MS (-ETIMEDOUT; *fd is closed: poll this one yourself). */
int mbx_mux_poll(struct mbx_run *r, int *fd, const char *run_id, uint64_t oo,
		 uint64_t eo, long in_pos, unsigned wait_ms,
		 struct mbx_report *rep, struct mb_err *err);

#endif
