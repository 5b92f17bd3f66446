/* xfer_fetch.h: one fetch of a large download's pieces, shared by
 * xfer_pieces.c (the fetch, its workers and cuts) and xfer_ahead.c (a
 * sequential reader's fetch going on in the background). Not for other
 * modules. */
#ifndef MBFS_XFER_FETCH_H
#define MBFS_XFER_FETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "fuse/transport/xfer.h"

/* Cut again when fewer cut pieces than this wait to be fetched. */
#define MBFS_FETCH_CUT_AHEAD 24u

/* One fetch: positions [0, count) of the list are GET, [count, ext) only
 * cut (a sequential reader comes for them next). An async one
 * (mbfs_xfer_fetch_start) runs on after its call returned, as p->fetch:
 * its workers wait for the list to grow rather than end, until it is
 * stopped or has the file's last piece. */
struct fetch {
	struct mbfs *fs;
	struct mbfs_pieces *p;
	int fd;
	bool async;
	pthread_t t;            /* async: the thread running the workers */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	/* protected by lock (and p->state with it): */
	size_t *list;           /* piece numbers, ascending */
	size_t count, ext, cap;
	bool stop;              /* async: hand out no more GETs */
	bool finished;          /* async: every worker has ended */
	size_t next;            /* position of the next GET */
	size_t cutpos;          /* positions below are cut or being cut */
	bool cutting;           /* a cut of this fetch runs */
	bool joining;           /* a worker waits for p->bg */
	struct mb_err err;
	int rc;                 /* the first error, -errno (0: none) */
};

/* A fetch of the count pieces of idx (NULL: 0..count-1) into fd, and up
 * to ahead more to cut; NULL with err set when it cannot be. */
struct fetch *mbfs_fetch_new(struct mbfs *fs, struct mbfs_pieces *p,
			      const size_t *idx, size_t count, size_t ahead,
			      int fd, struct mb_err *err);
/* The start of a fetch either way (now, or in the background): the one
 * before ended, the file checked unchanged, then mbfs_fetch_new. NULL
 * with *rc 0 when there is nothing to fetch, or -errno (err set). */
struct fetch *mbfs_fetch_begin(struct mbfs *fs, struct mbfs_pieces *p,
			       const size_t *idx, size_t count, size_t ahead,
			       int fd, struct mb_err *err, int *rc);
/* Free f, whose workers have ended: 0 or its error (in *err if not
 * NULL). */
int mbfs_fetch_free(struct fetch *f, struct mb_err *err);
/* A worker (mbfs_xfer_parallel): cut when the cut pieces run low, else
 * GET the next one cut, until done, failed or stopped. */
int mbfs_fetch_worker(void *ud, size_t t);
/* Past the positions whose pieces need no cut. f->lock held. */
void mbfs_fetch_skip_cut(struct fetch *f);
/* true (err set, passed through mbfs_fail) when p's file changed while
 * read. */
bool mbfs_fetch_stale(struct mbfs *fs, struct mbfs_pieces *p,
		      struct mb_err *err);

/* Piece i is in the fetch's fd (fetched; maybe removed from the guest
 * since). The fetch's lock held. */
static inline bool mbfs_fetch_in_fd(const struct mbfs_pieces *p, size_t i)
{
	return p->state[i] == MBFS_PIECE_FETCHED ||
	       p->state[i] == MBFS_PIECE_GONE;
}

#endif
