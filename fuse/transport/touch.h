/* touch.h: file times set on the guest by fuse/guest/touch.sh (`touch -c
 * -h`; items with the same times share one touch), one exec per batch whose
 * JSON-escaped size stays below the command limit (16 KiB), so its request
 * is also below the 32 KiB body limit whatever bytes the names hold.
 * `touch -c` leaves a path that has gone alone. Used by batch.c; knows
 * nothing of queues or caches. */
#ifndef MBFS_TOUCH_H
#define MBFS_TOUCH_H

#include <stddef.h>
#include <time.h>

struct mbfs;

struct mbfs_touch {
	char *path;              /* mount-relative */
	struct timespec a, m;    /* tv_nsec UTIME_OMIT: leave alone */
	int rc;                  /* outcome: 0 or -errno */
};

/* Set the times of the n items of v (reordered here). Each outcome goes
 * to v[i]->rc (set rc to 0 first); why receives a message for the log
 * when something failed. */
void mbfs_touch_send(struct mbfs *fs, struct mbfs_touch **v, size_t n,
		     char *why, size_t whysz);

/* ts as a `touch -d` value (@SECONDS.NANOSECONDS), "-" for UTIME_OMIT. */
void mbfs_touch_time(char out[32], const struct timespec *ts);

#endif
