/* prefetch_int.h: the inside of bulk reads, shared by prefetch.c (when
 * to archive or walk) and prefetch_job.c (one run of pack.sh: its pieces
 * into the data cache and the listings into the attribute cache). Not for
 * other modules. */
#ifndef MBFS_PREFETCH_INT_H
#define MBFS_PREFETCH_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"
#include "fuse/transport/xfer.h"

#define MAX_RECS 64
#define MAX_COLD 16
#define MAX_WALKS 8
/* room the excluded subtrees may take in the command (of its 16 KiB) */
#define EXCL_BYTES 6144u

struct mbfs;

/* An archive of dir's subtree, in flight or done within the window. */
struct rec {
	char *dir;
	uint64_t id;
	uint64_t at_ms;         /* when it ended */
	bool done;
	bool complete;          /* every small file under dir but those of
	                           the excluded subtrees (archived whole
	                           before) is in it */
};

/* A directory with one cold read and no archive yet. */
struct cold {
	char *dir;
	uint64_t at_ms;
};

struct mbfs_prefetch {
	pthread_mutex_t lock;
	pthread_cond_t done;            /* an archive or a walk ended */
	struct rec recs[MAX_RECS];      /* protected by lock */
	struct cold cold[MAX_COLD];     /* protected by lock */
	struct cold lcold[MAX_COLD];    /* protected by lock: cold listings */
	struct cold rcold[MAX_COLD];    /* protected by lock: those of them
	                                   for a readdir */
	struct rec walks[MAX_WALKS];    /* protected by lock: listing walks
	                                   (complete: nothing was cut) */
	uint64_t next_id;               /* protected by lock */
	char *leftover;                 /* protected by lock: the pieces'
	                                   directory of an archive done, removed
	                                   by the next pack.sh (one request
	                                   less) or at unmount */
	unsigned leftover_note;         /* its journal note (xfer_int.h) */
	mbfs_prefetch_ours_fn ours;     /* set at creation */
};

struct job {
	struct mbfs *fs;
	struct mbfs_prefetch *p;
	const char *base;           /* mount-relative directory archived */
	char *first;                /* the triggering directory, relative
	                               to base ("." for base) */
	char **excl;                /* subtrees left out, relative to base */
	size_t nexcl;
	struct mbfs_pieces pieces;  /* on the guest until released */
	time_t now;                 /* the guest's clock before the walk */
	uint64_t ls;                /* bytes of listings ending the pieces */
	uint64_t ctr;               /* the cache's write counter before */
	uint64_t stamp;             /* the data cache's (mbfs_data_stamp) */
	bool cut;
	bool listings;              /* the listings alone, no file */
	size_t files, put;
	int fd;                     /* the archive, local */
	char *buf;
	char *inl;                  /* listings that came in pack.sh's
	                               answer (inl_len bytes), or NULL */
	size_t inl_len;
};

/* Run pack.sh for j->base and take what it made: an archive's members
 * into the data cache, the listings into the attribute cache. true when
 * complete (nothing was cut); failures are logged. j->pieces stay on the
 * guest (mbfs_prefetch_leave). */
bool mbfs_prefetch_run(struct job *j);

/* Hand the pieces' directory dir (taken) and its journal note to the
 * next pack.sh, or remove it now when one is waiting already. */
void mbfs_prefetch_leave(struct mbfs_prefetch *p, struct mbfs *fs, char *dir,
			 unsigned note);

#endif
