/* data.h: the local cache directory of one mount.
 *
 * DIR/data/ holds local copies of file contents: clean copies indexed in
 * memory by (path, size, mtime), so a copy is only reused while the guest
 * reports the same size and mtime, and the working copies of open files
 * (owned by node.c while open). DIR/kept/ holds the data of uploads that
 * failed; it is never cleaned automatically. data/ is emptied at start.
 * Clean copies beyond the size cap are evicted oldest first.
 * Thread-safe (data->lock is a leaf lock); never touches the network.
 */
#ifndef MBFS_DATA_H
#define MBFS_DATA_H

#include <stdint.h>
#include <time.h>

#include "common/err.h"

struct mbfs_data;

int mbfs_data_new(const char *dir, uint64_t cap_bytes, struct mbfs_data **out,
		  struct mb_err *err);
/* Frees the index and removes the clean copies (not kept/). */
void mbfs_data_free(struct mbfs_data *d);

/* Create a new empty working file; *local malloc'd, *fd open O_RDWR. */
int mbfs_data_newfile(struct mbfs_data *d, char **local, int *fd);

/* Take the clean copy of path if it matches (size, mtime): removed from the
 * index and handed to the caller (*local malloc'd). 1 when taken, 0 if not
 * (a mismatching copy is deleted). */
int mbfs_data_take(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char **local);

/* Index local (taken over, freed by d) as the clean copy of path. */
void mbfs_data_put(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char *local);

/* Delete the clean copy of path / of path and all below / of everything. */
void mbfs_data_drop(struct mbfs_data *d, const char *path);
void mbfs_data_drop_tree(struct mbfs_data *d, const char *path);
void mbfs_data_drop_all(struct mbfs_data *d);

/* Delete a working file (unlink + free). */
void mbfs_data_discard(char *local);

/* Copy the first size bytes of fd to a new file under kept/ named after
 * rpath; its path goes to out (PATH_MAX). 0 or -errno. */
int mbfs_data_keep(struct mbfs_data *d, const char *rpath, int fd,
		   uint64_t size, char *out, size_t outsz);

#endif
