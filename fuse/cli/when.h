/* when.h: deadlines for people: a local time and how long until then
 * ("13:00 (in 59m)"), and spans ("10m"). Used by `mbfs --list` and the
 * success lines of `mbfs --create`. Pure formatting: no clock but the one
 * passed in, no I/O.
 */
#ifndef MBFS_WHEN_H
#define MBFS_WHEN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* A span of ms, rounded down to its two largest units: "45s", "10m",
 * "1h 5m", "2d 3h". */
void mbfs_when_span(int64_t ms, char *out, size_t n);

/* The local time t as "HH:MM" when it is on the same local day as now,
 * else "YYYY-MM-DD HH:MM", then " (in 23m)", or " (passed)" once t <= now. */
void mbfs_when_deadline(time_t t, time_t now, char *out, size_t n);

/* What `mbfs --create` prints after ID@GENERATION, two lines ending in
 * '\n': the hard deadline expires (Unix seconds, 0 when unknown), and
 * the idle timeout idle_ms (0 when unknown) with the mount's keep-alive
 * interval keepalive_ms (0: off). */
void mbfs_when_create_lines(time_t expires, time_t now, long long idle_ms,
			    uint64_t keepalive_ms, char *out, size_t n);

#endif
