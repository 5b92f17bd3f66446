/* limiter.h: at most 4 operations in flight per container on this machine.
 *
 * The hosted service refuses a 5th concurrent operation on a container with
 * 429 execution_limit. The mount and any number of mbexec processes share one
 * lock file per (API URL, container id) under $XDG_RUNTIME_DIR/mainbrella or
 * /tmp/mainbrella-<uid>/, holding MB_LIMIT_SLOTS byte-range OFD locks: a slot
 * is a held lock, so a crashed process frees its slots at once.
 * The client (api.h) takes a slot around every pool-using request on its own;
 * callers use this directly only to hold a slot for a running managed job.
 * Thread-safe.
 */
#ifndef MB_LIMITER_H
#define MB_LIMITER_H

#include "err.h"

#define MB_LIMIT_SLOTS 4

struct mb_limiter;      /* one per (api url, container id); opaque */
struct mb_limit_slot;   /* one held slot; opaque */

/* Open (creating if needed) the limiter for key (e.g. "<apiUrl> <id>"). */
int mb_limiter_open(const char *key, struct mb_limiter **out, struct mb_err *err);
void mb_limiter_free(struct mb_limiter *l);

/* Block until a slot is free, or until timeout_ms passes (-ETIMEDOUT;
 * timeout_ms < 0 waits for ever). */
int mb_limiter_acquire(struct mb_limiter *l, long timeout_ms,
		       struct mb_limit_slot **out, struct mb_err *err);
void mb_limiter_release(struct mb_limit_slot *s);

#endif
