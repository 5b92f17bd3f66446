/* agent.h: the mount as its sandbox's one agent for mbexec on this machine.
 *
 * Every running mbexec polls its command on the guest. Alone, each poll is
 * an exec that holds one of the sandbox's 4 operations for up to a second,
 * so four running commands lock the sandbox: the mount's own file
 * operations and every further command wait. Through the mount, the polls
 * of all running commands go out together, as one exec that waits until
 * any of them has something new and answers each: N running commands cost
 * one operation between them, and the mount's file operations keep the
 * other three. mbexec finds the socket (common/agent.h) in the control
 * file and falls back to polling by itself when it cannot reach it.
 */
#ifndef MBFS_AGENT_H
#define MBFS_AGENT_H

#include <stdbool.h>

struct mbfs;
struct mbfs_agent;

/* Listen on a fresh socket whose name goes into fs's control file (fills
 * name). 0 or -errno (the mount then works without one). */
int mbfs_agent_start(struct mbfs *fs, struct mbfs_agent **out, char *name,
		     unsigned long name_size);

/* Stop listening, answer what is queued with an error, join the threads.
 * NULL is fine. */
void mbfs_agent_stop(struct mbfs_agent *a);

/* Whether an mbexec of this mount is connected: a command runs (mbexec
 * holds its connection from its first poll to its end). NULL: false. */
bool mbfs_agent_active(struct mbfs_agent *a);

#endif
