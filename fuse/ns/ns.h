/* ns.h: namespace changes, each followed by the invalidations it implies
 * (cache, data copies, open nodes). What reaches the guest goes through
 * fuse/guest/ns.sh or a write-back batch (apply.sh), which both refuse a
 * path through a symlink below the mounted directory: -ELOOP.
 *
 * Mutations are never repeated blindly: after an ambiguous failure the
 * affected paths are stat'ed (contract §7.1) and the outcome decided from
 * what the guest shows. Paths are mount-relative. Thread-safe.
 */
#ifndef MBFS_NS_H
#define MBFS_NS_H

#include <stdint.h>
#include <sys/types.h>

struct mbfs;

/* Without -o sync_close, a new directory whose parent and free name the
 * mount knows is queued for the next write-back batch (wbq.h) and shown
 * until it lands; otherwise the mkdir route. */
int mbfs_ns_mkdir(struct mbfs *fs, const char *path, mode_t mode);
int mbfs_ns_unlink(struct mbfs *fs, const char *path);
int mbfs_ns_rmdir(struct mbfs *fs, const char *path);
/* flags: 0 or RENAME_NOREPLACE (others are refused by the caller). */
int mbfs_ns_rename(struct mbfs *fs, const char *from, const char *to,
		   unsigned flags);
/* A directory's mode goes in the next write-back batch, like its mkdir;
 * so does a file's that no one holds open (wbq.h: mbfs_wbq_chmod); an
 * open file's is set now (or travels with its queued copy). */
int mbfs_ns_chmod(struct mbfs *fs, const char *path, mode_t mode);
/* truncate(2) by path (no open handle). */
int mbfs_ns_truncate(struct mbfs *fs, const char *path, off_t size);
/* A symlink to target (checked by the caller), made on the sandbox now. */
int mbfs_ns_symlink(struct mbfs *fs, const char *target, const char *path);
/* A hard link to from: both names of a file still queued here, else made
 * on the sandbox now. */
int mbfs_ns_link(struct mbfs *fs, const char *from, const char *to);

#endif
