/* stdin_exec.h: local stdin for the exec strategy.
 *
 * Small stdin that ends at once travels inside the launch script (probe).
 * Anything else is streamed: a thread reads stdin and uploads it as chunk
 * files RUNDIR/in.000000, in.000001... (file PUTs are atomic, so the guest
 * reader never sees half a chunk), MBX_UP_PARALLEL PUTs at once (one of the
 * sandbox's 4 operations stays for the poll), at most MBX_UP_WINDOW chunks
 * ahead of the guest reader (its count comes back in reports as in.pos),
 * then in.eof holding the number of chunks.
 */
#ifndef MBX_STDIN_EXEC_H
#define MBX_STDIN_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "shim/mbexec.h"

#define MBX_UP_CHUNK (1024u * 1024)   /* bytes per chunk file (<= 1 MiB PUT) */
/* Chunks on the guest not yet read. Large, so that a fast reader rarely
 * waits for a poll to report progress (each such wait costs a round trip
 * and up to 50 ms of guest polling); it costs guest disk, not memory. */
#define MBX_UP_WINDOW 32
#define MBX_UP_PARALLEL 3             /* chunk PUTs at once */
#define MBX_UP_SLOTS 6                /* local 1 MiB buffers: sending, ready, filling */

struct mbx_uploader;

/* Read what fd offers within a few tens of ms, up to limit + 1 bytes.
 * *data is malloc'd (may be NULL when *len is 0); *eof when fd ended.
 * 0 or -errno. */
int mbx_stdin_probe(int fd, size_t limit, unsigned char **data, size_t *len,
		    bool *eof);

/* Start uploading fd to run_dir (a guest path), beginning with the probed
 * bytes pre (taken over; freed by the uploader) and, when pre_eof, only
 * those. 0 or -errno. */
int mbx_uploader_start(struct mbx_run *r, int fd, const char *run_dir,
		       unsigned char *pre, size_t prelen, bool pre_eof,
		       struct mbx_uploader **out);

/* The guest reader has consumed pos chunks (from a report). */
void mbx_uploader_consumed(struct mbx_uploader *u, long pos);

/* The in.pos a poll should wait to change (the uploader is blocked on its
 * window), or -1. */
long mbx_uploader_waiting(struct mbx_uploader *u);

/* 1 when uploading failed for good (the message is in msg). */
int mbx_uploader_failed(struct mbx_uploader *u, char *msg, size_t n);

/* Stop (the command ended) and free. A thread stuck in a request is left
 * to die with the process rather than waited for beyond ~2 s. */
void mbx_uploader_stop(struct mbx_uploader *u);

#endif
