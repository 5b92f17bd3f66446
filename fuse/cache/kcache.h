/* kcache.h: what the kernel caches for the mount, and telling it when that
 * went stale.
 *
 * The kernel keeps names and attributes for the timeouts ops.c gives
 * libfuse, and file pages across opens. This module remembers the paths
 * the kernel has been shown (mbfs_kcache_seen) and, when the mount learns
 * that one changed, asks the kernel to drop its attributes and pages
 * (mbfs_kernel's invalidate). One thread of its own does the asking: while it
 * invalidates, the kernel may wait for a request the mount is still
 * answering (a page locked by a read or write in progress, whose handler
 * may wait for a lock the caller holds), so asking from inside an op could
 * deadlock. Callers only queue.
 *
 * Single names are not dropped here, attributes are. Once its attributes are dropped, a name
 * that vanished on the guest is found gone by the next getattr
 * (mbfs_kcache_gone). A name that appeared may be held by the kernel as
 * missing (a negative entry, kept when the kernel can drop them all, see
 * mbfs_kcache_use_epochs): then every name is dropped at once (protocol
 * 7.44's epoch), which costs one lookup per name used next, and is asked
 * for only when the guest shows a name the kernel was told is missing
 * within the negative timeout, or on an invalidation (stale_all).
 *
 * Does not know the daemon's own cache (cache.c tells it of changes), the
 * guest, or open files. Thread-safe: every call but _start/_stop/_free may
 * come from any thread holding any mbfs lock; kc->lock is a leaf, never
 * held across a call into libfuse.
 */
#ifndef MBFS_KCACHE_H
#define MBFS_KCACHE_H

#include <stdbool.h>
#include <sys/types.h>

struct mbfs_kcache;

/* How this module reaches the kernel (the FUSE session's, ll.h). */
struct mbfs_kernel {
	/* drop path's attributes and pages: 0, -ENOENT when the kernel
	 * holds no inode for it, or -errno */
	int (*invalidate)(const char *path);
	/* write a raw notification to the device: 0 or -errno */
	int (*notify)(const void *msg, size_t len);
	/* drop the name path (its directory's entry for it): the next
	 * lookup asks again. 0 or -errno */
	int (*invalidate_name)(const char *path);
};

/* Paths remembered at most; beyond, new ones are not (their kernel copies
 * then expire with the timeouts only). */
#define MBFS_KCACHE_MAX (1u << 20)

/* An empty kcache (nothing remembered, no thread), or NULL without memory.
 * Every call below accepts NULL and then does nothing. */
struct mbfs_kcache *mbfs_kcache_new(void);
/* After mbfs_kcache_stop. */
void mbfs_kcache_free(struct mbfs_kcache *kc);

/* Start the thread that invalidates through k (kept, not copied; from the
 * init op). 0 or -errno; without it, changes are queued and dropped at
 * stop, and the kernel's copies expire with the timeouts. */
int mbfs_kcache_start(struct mbfs_kcache *kc, const struct mbfs_kernel *k);
/* Stop the thread (what is still queued is dropped). Before the session
 * is unmounted: the thread writes to its device. Idempotent. */
void mbfs_kcache_stop(struct mbfs_kcache *kc);

/* The kernel was given the attributes of path (a lookup, a getattr, a
 * readdirplus entry) with mode: remember it. Cheap; called on every such
 * answer. true when the kernel was last shown another type under this name
 * (the guest made a file a directory, say): it would find its inode of the
 * old type wrong and fail the call with EIO, so a getattr answers ESTALE
 * instead, and the kernel looks the name up again (see _gone). */
bool mbfs_kcache_seen(struct mbfs_kcache *kc, const char *path, mode_t mode);
/* path became to through the mount (a rename the kernel made itself): what
 * was remembered of from and below it is now under to. */
void mbfs_kcache_moved(struct mbfs_kcache *kc, const char *from,
		       const char *to);

/* path no longer exists: forget it (what was below it is forgotten as the
 * kernel lets go of it, see stale_all). true when
 * the kernel was shown it, so it may still hold a name for it that no
 * lookup will check before the entry timeout: the getattr that found it
 * gone then answers ESTALE, and the kernel looks the name up again (every
 * path-based call retries once with LOOKUP_REVAL), this time ENOENT. Not
 * after every name was dropped (an epoch) since it was shown: the kernel
 * then holds no valid name for it, and ESTALE would fail the fresh lookup
 * of a mkdir, symlink or link, which is not retried. */
bool mbfs_kcache_gone(struct mbfs_kcache *kc, const char *path);

/* The kernel's name path is to go (a command renamed the file it leads
 * to, which the mount followed), and the attributes and pages of the
 * inode it leads to now: queued, dropped by the thread. */
void mbfs_kcache_drop_name(struct mbfs_kcache *kc, const char *path);
/* Queue the invalidation of path's attributes and pages, when the kernel
 * was shown it. Returns at once. */
void mbfs_kcache_stale(struct mbfs_kcache *kc, const char *path);
/* The same for path and every remembered path below it. */
void mbfs_kcache_stale_tree(struct mbfs_kcache *kc, const char *path);
/* The same for every remembered path, and every name as with
 * mbfs_kcache_names_stale; paths the kernel no longer holds are forgotten
 * on the way. */
void mbfs_kcache_stale_all(struct mbfs_kcache *kc);

/* The kernel takes the epoch notification (FUSE protocol 7.44, Linux
 * 6.16) and keeps a missing name neg_ms: from the init op, before the
 * kernel holds any. Without it, the kernel holds no missing names (ops.c)
 * and the two calls below do nothing. */
void mbfs_kcache_use_epochs(struct mbfs_kcache *kc, uint64_t neg_ms);
/* A lookup told the kernel path is missing: remember it for as long as
 * the kernel may keep that. Cheap. */
void mbfs_kcache_missing(struct mbfs_kcache *kc, const char *path);
/* The guest says path exists (a listing, a stat): when the kernel may
 * hold it as missing, queue dropping every name it holds. Returns at
 * once; counts for mbfs_kcache_wait. */
void mbfs_kcache_appeared(struct mbfs_kcache *kc, const char *path);

/* Wait until everything queued before the call has been invalidated, at
 * most timeout_ms (the kernel may wait for a request this caller's thread
 * would answer: single-threaded sessions). true when done, false on
 * timeout or when no thread runs. Never call it holding a lock an op may
 * need. */
bool mbfs_kcache_wait(struct mbfs_kcache *kc, unsigned timeout_ms);
/* How long the invalidate command waits for the kernel (control.c). */
#define MBFS_KCACHE_WAIT_MS 5000u

#endif
