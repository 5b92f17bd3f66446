/* wbq_pending.h: the paths the write-back queue still holds, for messages
 * (wbq_pending.c). Kept apart from wbq.h: it only reads the queue. */
#ifndef MBFS_WBQ_PENDING_H
#define MBFS_WBQ_PENDING_H

#include <stddef.h>

struct mbfs;

/* The mount paths ("/a/b") of the first max files and new directories
 * queued or in flight, oldest first, as a JSON array (malloc'd; "[]"
 * when none), or NULL without memory. Takes nodes_lock then the queue's
 * lock: never with either held. */
char *mbfs_wbq_pending_json(struct mbfs *fs, size_t max);

#endif
