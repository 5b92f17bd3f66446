/* gone.h: the names removed here whose removal is still queued for the
 * sandbox (wbq.h): the view shows them gone until it lands. A table of
 * paths with a count each (a name removed, made again and removed again
 * is in it twice), filled and emptied by the write-back queue. Its lock is
 * a leaf. Thread-safe. */
#ifndef MBFS_GONE_H
#define MBFS_GONE_H

#include <stdbool.h>
#include <stddef.h>

struct mbfs_gone;

struct mbfs_gone *mbfs_gone_new(void);
void mbfs_gone_free(struct mbfs_gone *g);

/* path's removal is queued (0), or -ENOMEM. */
int mbfs_gone_add(struct mbfs_gone *g, const char *path);
/* One queued removal of path has landed or failed. */
void mbfs_gone_remove(struct mbfs_gone *g, const char *path);
/* Is a removal of path, or of a directory above it, queued? Cheap when
 * none is. */
bool mbfs_gone_below(struct mbfs_gone *g, const char *path);

/* Is a removal of exactly the first len bytes of path queued? */
bool mbfs_gone_at(struct mbfs_gone *g, const char *path, size_t len);

#endif
