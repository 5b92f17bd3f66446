/* watch.h: end the session when our mount disappears from our namespace
 * while copies in other mount namespaces keep the connection alive. */
#ifndef MBFS_WATCH_H
#define MBFS_WATCH_H

#include <stdatomic.h>

/* Set once the watcher saw the mount go (nothing left to unmount). */
extern atomic_int mbfs_watch_gone;

/* Call after fuse_mount and the signal handlers are set (the watcher ends
 * the session with SIGTERM). 0, or -1 when the mount cannot be watched. */
int mbfs_watch_start(const char *mountpoint);

/* Stop watching; call before removing the session's signal handlers. */
void mbfs_watch_stop(void);

#endif
