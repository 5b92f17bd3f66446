/* wbq_pending.c: which paths the write-back queue still holds (wbq.h),
 * named for `mbfs -u` and the record an ended mount leaves (unsent.h).
 * Reads the queue only; sending stays wbq.c's. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>

#include "fuse/mbfs.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_pending.h"
#include "fuse/outbox/wbq_int.h"

char *mbfs_wbq_pending_json(struct mbfs *fs, size_t max)
{
	struct mbfs_wbq *q = fs->wbq;
	cJSON *a = cJSON_CreateArray();
	char *text = NULL;
	if (!a)
		return NULL;
	if (q) {
		/* the lock order of wbq.h: a node's path is nodes_lock's */
		pthread_mutex_lock(&fs->nodes_lock);
		pthread_mutex_lock(&q->lock);
		size_t k = 0;
		for (const struct mbfs_wbq_entry *e = q->head; e && k < max;
		     e = e->next) {
			/* a directory's time or mode is no file of the user's */
			const char *p = e->n ? q->files->where(e->n)
				: e->kind == MBFS_WBDIR_MAKE ? e->dpath : NULL;
			if (p && cJSON_AddItemToArray(a, cJSON_CreateString(p)))
				k++;
		}
		pthread_mutex_unlock(&q->lock);
		pthread_mutex_unlock(&fs->nodes_lock);
	}
	text = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return text;
}
