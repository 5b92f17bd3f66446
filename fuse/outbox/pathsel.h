/* pathsel.h: which paths a barrier selects relative to a path: one rule
 * for the batch of times (batch.h), the write-back queue (wbq.h) and the
 * table of new directories (newdir.h). Pure functions of mount-relative
 * paths ("/" or "/a/b"); no state, no locks. */
#ifndef MBFS_PATHSEL_H
#define MBFS_PATHSEL_H

#include <stdbool.h>

/* Which paths, relative to a path, a flush or a barrier takes. */
#define MBFS_BATCH_SELF     1u  /* the path itself */
#define MBFS_BATCH_BELOW    2u  /* anything below it */
#define MBFS_BATCH_PARENT   4u  /* its directory */
#define MBFS_BATCH_CHILDREN 8u  /* the entries of the directory path */

/* a is b, or below it ("/" holds everything). */
bool mbfs_path_at_or_below(const char *a, const char *b);
/* a is the directory holding b. */
bool mbfs_path_is_parent(const char *a, const char *b);
/* Whether item is one of which (above) relative to path. */
bool mbfs_path_selects(const char *item, const char *path, unsigned which);

#endif
