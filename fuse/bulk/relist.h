/* relist.h: listings the guest gives (fuse/guest/follow.sh's -d lines),
 * and the directories a command may have changed, listed again in one
 * exec.
 *
 * After a command, mbexec tells the mount to forget what it knows
 * (control.c), and the next lookup of each directory level would list it
 * again through the list route: one request per directory, with whole
 * seconds for times. Instead, the directories the mount held listed when
 * it was told (the latest MBFS_RELIST_DIRS of at most MBFS_RELIST_KIDS
 * entries, listed within MBFS_RELIST_GRACE_MS, and the held ones above
 * them, MBFS_RELIST_ALL in all) are noted, and the first
 * lookup or readdir that would list one of them lists them all in one
 * follow.sh: one request for the walk back to the command's directory and
 * the editor's, and the sandbox's times to the nanosecond, so that make
 * sees a source a command changed within the second of its target. A
 * mount told nothing sends nothing more; a failed or cut answer leaves the
 * lookups to list as before.
 *
 * Thread-safe: the module's lock is a leaf, never held across I/O. One
 * relist at a time; a lookup of a noted directory meanwhile waits for it.
 */
#ifndef MBFS_RELIST_H
#define MBFS_RELIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ident.h"   /* MB_PATH_MAX */

struct mbfs;
struct mbfs_relist;

#define MBFS_RELIST_DIRS 16
/* ... and the held directories above them: the way back to them */
#define MBFS_RELIST_ALL 32
#define MBFS_RELIST_KIDS 256
#define MBFS_RELIST_GRACE_MS (10u * 60u * 1000u)
/* How long a listing through the guest (the relist, a cold one) waits for
 * its answer at most, and half of what is left of the operation: then
 * the list route lists what the lookup needs. */
#define MBFS_RELIST_WAIT_MS 3000

struct mbfs_relist *mbfs_relist_new(void);
/* NULL is fine. */
void mbfs_relist_free(struct mbfs_relist *r);

/* The mount is about to forget what it knows because a command ran: note
 * the directories it holds listed (call before the cache forgets them). */
void mbfs_relist_note(struct mbfs *fs);

/* The listing of dir (mount-relative) is about to be fetched. When dir is
 * noted, every noted directory is listed in one exec into the cache (on
 * this thread, or another's run is waited for). true when dir was among
 * them (its listing may be in the cache now), false otherwise. */
bool mbfs_relist_listing(struct mbfs *fs, const char *dir);

/* A directory the mount has no listing of (a cold ls, a lookup in it),
 * listed through the guest: one find, which gives each entry's time to
 * the nanosecond, where the list route gives whole seconds (and runs a
 * stat per entry on the guest). true when its listing is in the cache
 * now; false (the list route lists it, as before) when the guest could
 * not say, or dir has more than MBFS_COLD_KIDS entries, or a name with a
 * newline, or dir_timeout is 0 (no listing is kept). A directory found
 * too large is remembered for MBFS_RELIST_GRACE_MS: its next cold
 * listings go the list route's way at once, with no find whose answer
 * would be thrown away. Callers at once for one directory (lookups in
 * parallel) share one find. */
#define MBFS_COLD_KIDS 4096
bool mbfs_relist_cold(struct mbfs *fs, const char *dir);

/* follow.sh's listings in text (from its "@" line; cut at each newline),
 * of the nd directories dirs (mount-relative) that the guest knows as
 * rdirs, each put in the cache as a fresh listing (mbfs_cache_put_listing,
 * with follow and ctr as there) when the walk ended and it was read whole
 * with at most max_kids * 2 entries. How many were put; *big (may be
 * NULL) says whether one had more. */
size_t mbfs_relist_take(struct mbfs *fs, char *text,
			char (*dirs)[MB_PATH_MAX], char (*rdirs)[MB_PATH_MAX],
			size_t nd, uint64_t ctr, size_t max_kids, bool follow,
			bool *big);

#endif
