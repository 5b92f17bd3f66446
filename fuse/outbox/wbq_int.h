/* wbq_int.h: the inside of the write-back queue, shared by wbq.c (the
 * queue, its flusher and the files), wbq_send.c (one batch), wbq_dir.c
 * (the entries of other names: mkdirs, modes, times, removals) and
 * wbq_up.c (uploads on their own). Not for other modules. */
#ifndef MBFS_WBQ_INT_H
#define MBFS_WBQ_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fuse/outbox/wbsend.h"

struct mbfs;
struct mbfs_node;
struct mbfs_wbq_files;

/* An entry is a file (n) or a change of another name (dpath): a
 * directory's mkdir, mtime or mode, a removal, or a file's move. */
struct mbfs_wbq_entry {
	struct mbfs_wbq_entry *next;
	struct mbfs_node *n;     /* the queue's reference; NULL: a directory */
	enum mbfs_wbdir_kind kind;   /* a directory's change */
	char *dpath;             /* the directory (MV: the file moved) */
	char *dto;               /* MV: its new name */
	char mv_id[17];          /* MV: its name for good (wbsend.h) */
	uint64_t shown;          /* MV: the new name's entry in newdir.h
	                            (mbfs_newdir_add_file), 0 once gone */
	struct timespec dtime;   /* TIME: its mtime (mbfs_wbq_dir_time) */
	unsigned dmode;          /* MAKE, MODE: its permission bits */
	bool base_known;         /* RM: the file it removes (wbsend.h) */
	uint64_t base_size;
	time_t base_mtime;
	bool landed;             /* a removal: out of the gone table */
	unsigned jid;            /* not a file: its line in the journal's
	                            outbox log (journal.h), 0 when none */
	uint64_t bytes;          /* size when last queued */
	uint64_t since_ms;       /* queued at */
	bool inflight;           /* in the batch being sent */
	bool again;              /* closed dirty again while in flight */
	bool urgent;             /* someone waits for it: no delay */
	bool doubt;              /* MAKE: a batch that held it got no
	                            answer, and may have made it */
	uint64_t seq;            /* its place in the order of queueing
	                            (1, 2, ...): a flush waits for the
	                            entries queued before it only */
	uint64_t again_seq;      /* again: the place of the first close
	                            since it left, its seq once it lands */
};

#define MBFS_WBQ_UNSAID 64

struct mbfs_wbq {
	const struct mbfs_wbq_files *files;   /* set at mount, then fixed */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* any change: queued, sent, stop */
	struct mbfs_wbq_entry *head;      /* protected by lock, oldest first */
	struct mbfs_wbq_entry **tail;     /* the last entry's next, or &head */
	size_t queued;           /* entries not in flight */
	uint64_t next_seq;       /* the next entry's seq */
	uint64_t queued_bytes;
	size_t inflight;
	uint64_t inflight_bytes;
	size_t dirs;             /* TIME and MODE entries, queued or not */
	size_t removes;          /* RM, RMDIR, MV and CHMOD entries, queued or
	                            not */
	size_t chmods;           /* CHMOD entries of them */
	size_t flushing;         /* callers waiting in mbfs_wbq_flush */
	size_t nfiles;           /* file entries, queued or in flight: each
	                            holds its node's working copy open */
	bool running, stop;
	pthread_t thread;
	/* totals since mount */
	uint64_t sent_files, sent_batches, sent_bytes, failed_files;
	/* failures no sync has said yet: per batch, the least seq of its
	 * failed entries and how many failed. A sync says those of the
	 * entries queued before it began, not those of later ones (a writer
	 * going on meanwhile); when full, the last takes in the newest */
	struct { uint64_t seq, count; bool conflict; } unsaid[MBFS_WBQ_UNSAID];
	size_t nunsaid;
	char last_error[256];
	/* disconnected: batches that could not reach the sandbox go again
	 * (wbq.c, retry_later); retries counts them since mount */
	uint64_t retries, retry_at;   /* retry_at: ms, 0 when connected */
	uint64_t sending_since;       /* ms the batch in flight left; 0: none */
	unsigned retry_streak;        /* failed tries in a row */
	/* uploads on their own, running now (wbq_up.c) */
	size_t up_files;
	uint64_t up_bytes;
	uint64_t up_failed;      /* since mount */
	uint64_t up_conflicts;   /* ... refused as conflicts, each kept */
};

/* Form, send and settle one batch of the oldest queued entries
 * (wbq_send.c). q->lock held; dropped meanwhile. */
void mbfs_wbq_send_locked(struct mbfs *fs, struct mbfs_wbq *q);
/* count files (the last path) failed (why), the first of them queued at
 * seq: the next sync that waited for it says so. conflict: each was
 * refused because the sandbox's file changed since the mount's copy was
 * made, and both versions are kept (a sync says -EEXIST for those alone).
 * q->lock held. */
void mbfs_wbq_note_failure_locked(struct mbfs_wbq *q, size_t count,
				  uint64_t seq, const char *path,
				  const char *why, bool conflict);

/* Queue e (not in flight) at the end, as of now. q->lock held. */
void mbfs_wbq_append_locked(struct mbfs_wbq *q, struct mbfs_wbq_entry *e);

/* Start the flusher with the first entry. q->lock held. */
void mbfs_wbq_start_locked(struct mbfs *fs, struct mbfs_wbq *q);

/* A new directory entry of kind for path at the end of the queue, or NULL
 * without memory. q->lock held. */
struct mbfs_wbq_entry *mbfs_wbq_append_dir_locked(struct mbfs_wbq *q, const char *path,
					 enum mbfs_wbdir_kind kind);

/* After a batch: a queued mkdir of path ran (rc 0) or failed (why). */
void mbfs_wbq_made(struct mbfs *fs, const char *path, int rc, const char *why);
/* After a batch that ran: a directory's time or mode in it is set, or a
 * removal in it is done (d->rc 0) or failed (reported here). */
void mbfs_wbq_dir_landed(struct mbfs *fs, const struct mbfs_wbdir *d);
/* The move of entry e (d: its outcome) is done or failed: the view
 * shows what the sandbox has from now on. */
void mbfs_wbq_moved(struct mbfs *fs, struct mbfs_wbq_entry *e,
		    const struct mbfs_wbdir *d);

/* Entry e (not a file) leaves the queue: its counters and its journal
 * line go, and it is freed. q->lock held. */
void mbfs_wbq_drop_dir_locked(struct mbfs *fs, struct mbfs_wbq *q,
			      struct mbfs_wbq_entry *e);

#endif
