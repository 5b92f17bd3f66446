/* agent.h: the mount's local socket for mbexec: its name, connecting, and
 * one framed JSON message at a time.
 *
 * A mount (fuse/agent.c) is the one agent of its sandbox on this machine:
 * mbexec (shim/mux.c) hands it the polls of its running commands, and it
 * sends them to the guest together, in one exec. The socket is in Linux's
 * abstract namespace (no file to leave behind, no path length limit); the
 * name is random and only in the control file, and the server accepts a
 * peer only when its uid is the mount's (SO_PEERCRED): other users never
 * get in. A message is a 4-byte big-endian length, then that much JSON.
 * Requests: {"op":"poll","prelude":S,"setup":S,"ready":S,"body":S,
 * "waitMs":N}; answers: {"out":S} or {"error":S,"errno":N,"httpStatus":N,
 * "code":S,"ambiguous":B}. Nothing here knows what the scripts do.
 */
#ifndef MB_AGENT_H
#define MB_AGENT_H

#include <sys/types.h>

#include <cJSON.h>

#include "common/ident.h"

#define MB_AGENT_MSG_MAX (4u << 20)

/* A fresh socket name: "mbfs-agent-PID-RANDOMHEX". 0 or -errno. */
int mb_agent_name(char out[MB_AGENT_NAME_MAX]);

/* Listen on name (close-on-exec). The fd, or -errno. */
int mb_agent_listen(const char *name);

/* Connect to name (close-on-exec). The fd, or -errno (-ECONNREFUSED when
 * no mount listens there any more). */
int mb_agent_connect(const char *name);

/* The uid of the process at the other end of a connected socket. */
int mb_agent_peer_uid(int fd, uid_t *uid);

/* Send one message (blocking, all of it). 0 or -errno. */
int mb_agent_send(int fd, const cJSON *msg);

/* Receive one message; *out is the caller's tree (cJSON_Delete). 0,
 * -ECONNRESET when the peer closed, -EPROTO on a malformed message. */
int mb_agent_recv(int fd, cJSON **out);

#endif
