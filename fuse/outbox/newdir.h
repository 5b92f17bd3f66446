/* newdir.h: directories made here whose mkdir waits in the write-back
 * queue (wbq.h), as the mount shows them until they reach the guest; and
 * files moved here whose move waits there, shown under the new name the
 * same way (add_file).
 *
 * A mkdir queued for the next batch returns at once; until the batch has
 * made it on the guest, the guest knows nothing of the directory, so what
 * the mount shows of it comes from here: its attributes, and that nothing
 * is below it but what the mount made there itself (fresh files, node.h;
 * directories, here). The cache asks here before it asks the guest
 * (cache.h), readdir lists the directories made in a directory, and the
 * queue removes an entry once its batch has run (on the guest, or failed:
 * then the guest's view shows again).
 *
 * Knows nothing of the queue or the cache. Thread-safe; the lock is a
 * leaf, never held across a call out of this module.
 */
#ifndef MBFS_NEWDIR_H
#define MBFS_NEWDIR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct mbfs_newdirs;

struct mbfs_newdirs *mbfs_newdirs_new(void);
void mbfs_newdirs_free(struct mbfs_newdirs *nd);

/* path (mount-relative) was made here with attributes st. 0 or -ENOMEM. */
int mbfs_newdir_add(struct mbfs_newdirs *nd, const char *path,
		    const struct stat *st);
/* A file (st) moved to path here, the move queued: shown until
 * mbfs_newdir_remove_id of the id returned (0: no memory), or a newer
 * add_file or remove of path. */
uint64_t mbfs_newdir_add_file(struct mbfs_newdirs *nd, const char *path,
			      const struct stat *st);
/* The entry id (still there: true, its attributes into st when not
 * NULL) goes: its move landed or failed. */
bool mbfs_newdir_remove_id(struct mbfs_newdirs *nd, uint64_t id,
			   struct stat *st);
/* path's mkdir ran (or failed), or it was removed here again: the guest
 * answers for it from now on. */
void mbfs_newdir_remove(struct mbfs_newdirs *nd, const char *path);
/* Give the pending path permission bits perm (a chmod that travels with
 * its mkdir). false when path is not pending. */
bool mbfs_newdir_set_perm(struct mbfs_newdirs *nd, const char *path,
			  unsigned perm);

/* 1 with *st when path is pending; -ENOENT when it is below a pending
 * directory (nothing is there but what the caller knows of: fresh files,
 * pending directories); 0 when the guest is to be asked. Cheap when
 * nothing is pending. */
int mbfs_newdir_stat(struct mbfs_newdirs *nd, const char *path,
		     struct stat *st);

/* The outermost pending name (a directory, or a moved file) at or above
 * path into out (MB_PATH_MAX bytes); false when there is none. */
bool mbfs_newdir_above(struct mbfs_newdirs *nd, const char *path, char *out);

/* Call fn for each pending directory directly in dir (name, attributes),
 * in the order they were made; non-zero from fn stops (and is returned).
 * fn runs on a copy, without the lock. 0, fn's value or -ENOMEM. */
int mbfs_newdir_each(struct mbfs_newdirs *nd, const char *dir,
		     int (*fn)(void *ud, const char *name,
			       const struct stat *st),
		     void *ud);

#endif
