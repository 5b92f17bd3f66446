/* data.h: the mount's local copies of file contents.
 *
 * They live in the mount's run directory (journal.h): clean copies indexed
 * in memory by (path, size, mtime), so a copy is only reused while the
 * guest reports the same size and mtime, and the working copies of open
 * files (owned by node.c while open; the journal records the dirty ones).
 * Clean copies are evicted oldest first beyond the size cap, which follows
 * the free space of the cache's disk (clean copies use at most half of
 * what they and the free space add up to), and on demand when a write
 * finds the disk full (mbfs_data_evict). Kept uploads are the journal's.
 * Thread-safe (data->lock is a leaf lock); never touches the network.
 */
#ifndef MBFS_DATA_H
#define MBFS_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"

struct mbfs_data;

/* Copies go to dir (the run directory, which exists). */
int mbfs_data_new(const char *dir, uint64_t cap_bytes, struct mbfs_data **out,
		  struct mb_err *err);
/* Frees the index and removes the clean copies. */
void mbfs_data_free(struct mbfs_data *d);

/* Create a new empty working file; *local malloc'd, *fd open O_RDWR. */
int mbfs_data_newfile(struct mbfs_data *d, char **local, int *fd);

/* A second name for the working file from (a link, no copy): the two
 * share their data until one of them takes a copy of its own before a
 * change (mbfs_data_shared). *local malloc'd, *fd open O_RDWR. 0 or
 * -errno. */
int mbfs_data_linkfile(struct mbfs_data *d, const char *from, char **local,
		       int *fd);
/* Does the file of fd have another name (or can that not be told)? */
bool mbfs_data_shared(int fd);

/* Take the clean copy of path if it matches (size, mtime): removed from the
 * index and handed to the caller: a file (*local malloc'd, *mfd -1) or a
 * copy in memory (*local NULL, *mfd open O_RDWR: never to be changed, as
 * a crash would lose the change; copy it to a file first). 1 when taken, 0
 * if not (a mismatching copy is deleted). */
int mbfs_data_take(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char **local, int *mfd);

/* Small clean copies may live in memory instead of the cache's disk (a
 * bulk read's thousands of small files, each a file made and removed on
 * the disk before), up to MBFS_DATA_MEM_CAP bytes and MBFS_DATA_MEM_FILES
 * copies in all (each holds a file descriptor: at most a quarter of the
 * process's limit). */
#define MBFS_DATA_MEM_FILE (64u * 1024u)
#define MBFS_DATA_MEM_CAP (32u * 1024u * 1024u)
#define MBFS_DATA_MEM_FILES 4096u
/* Is there room in memory for a copy of size bytes? */
bool mbfs_data_mem_room(struct mbfs_data *d, uint64_t size);
/* A new empty copy in memory (a memfd): 0 with *fd, or -errno. */
int mbfs_data_memfile(int *fd);
/* Index the clean copy of a released node as path's: a file local (taken
 * over, freed by d), or with local NULL a copy in memory mfd (taken over;
 * closed when there is no room any more). Known current at stamp since:
 * when the mount dropped path, or everything, since (an invalidation that
 * ran while the node was let go), the copy is discarded instead. */
void mbfs_data_put_clean(struct mbfs_data *d, const char *path, uint64_t size,
			 time_t mtime, char *local, int mfd, uint64_t since);

/* A stamp for mbfs_data_put_fetched, taken before a fetch begins. */
uint64_t mbfs_data_stamp(struct mbfs_data *d);
/* Like mbfs_data_put_clean for a copy fetched from the guest (a bulk read)
 * since stamp `since` (a file local, or with local NULL a copy in memory
 * mfd), unless the mount changed path since (dropped it, or a tree above
 * it) or holds a copy of it: then the copy is discarded, as
 * what the fetch found may be older than what the mount sent meanwhile
 * with the same size and whole-second mtime. */
void mbfs_data_put_fetched(struct mbfs_data *d, const char *path,
			   uint64_t size, time_t mtime, char *local, int mfd,
			   uint64_t since);

/* Delete the clean copy of path / of path and all below / of everything. */
void mbfs_data_drop(struct mbfs_data *d, const char *path);
void mbfs_data_drop_tree(struct mbfs_data *d, const char *path);
void mbfs_data_drop_all(struct mbfs_data *d);

/* Delete a working file (unlink + free). */
void mbfs_data_discard(char *local);
/* The same for a file that nothing has open any more and that carries no
 * journal record: emptied and kept for the next mbfs_data_newfile (up to
 * SPARE_MAX of them; deleted beyond, with d NULL, or when the file has
 * another name). Frees local. */
#define SPARE_MAX 512
void mbfs_data_recycle(struct mbfs_data *d, char *local);

/* Remove clean copies, oldest first, until want bytes are freed (the disk
 * is full). Returns the bytes freed, 0 when there was nothing to remove. */
uint64_t mbfs_data_evict(struct mbfs_data *d, uint64_t want);

#endif
