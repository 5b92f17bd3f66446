/* lease.h: keeping the container alive while mounted, and one warning
 * before its hard deadline.
 *
 * The service destroys a container when no renewing call (exec, file,
 * metadata) has reached it for its idle timeout (builder: 10 min), and
 * guest processes alone keep nothing alive (contract §2.2, §9.4). So a
 * mount nobody uses would lose its container. One thread makes a files/stat
 * of the mounted root whenever none of the mount's own calls has renewed
 * the container for fs->keepalive_ms (mb_client_last_renew_ms: calls made by
 * mbexec are not seen). An idle mount costs one request per interval, a
 * busy one nothing. A failed keep-alive is logged and tried again sooner;
 * once the generation is gone (mbfs_fail) the thread only waits for stop.
 *
 * The hard deadline (expiresAt) never moves, whatever the activity: the
 * thread logs one warning when less than MBFS_LEASE_WARN_S remain (at
 * once if that is already so when it starts). Thread-safe; lease->lock is
 * a leaf lock, never held across a request.
 */
#ifndef MBFS_LEASE_H
#define MBFS_LEASE_H

#include <stdint.h>

struct mbfs;

#define MBFS_LEASE_WARN_S 600
/* keep-alive interval when the service does not say its idle timeout */
#define MBFS_LEASE_DEFAULT_MS 180000u

/* The interval for an idle timeout (ms, 0 when unknown): a third of it,
 * so two keep-alives can fail before the container is lost. */
uint64_t mbfs_lease_default_ms(long long idle_timeout_ms);

/* Log the hard-deadline warning if it is due and not out yet. */
void mbfs_lease_warn_if_due(struct mbfs *fs);

/* Start the thread (after daemonising; fs->client set). 0 or -errno;
 * nothing to do (no keep-alive, deadline unknown) is 0 without a thread. */
int mbfs_lease_start(struct mbfs *fs);
/* Stop and free it (unmount). Safe when never started. */
void mbfs_lease_stop(struct mbfs *fs);

#endif
