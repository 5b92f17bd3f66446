/* node_int.h: the inside of an open-file node, shared by node.c (sharing,
 * writes), fresh.c (files created here), upload.c (uploads) and load.c
 * (getting the guest's content into the local copy). Not for other
 * modules. Locking as described in node.c. */
#ifndef MBFS_NODE_INT_H
#define MBFS_NODE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fuse/mbfs.h"
#include "fuse/node/guestfile.h"
#include "fuse/node/node.h"
#include "fuse/transport/xfer.h"

struct mbfs_node {
	/* protected by fs->nodes_lock */
	struct mbfs_node *next;     /* fs->nodes (nodeset.h) */
	struct mbfs_node **pprev;
	struct mbfs_node *hnext;
	char *path;                 /* changed by mbfs_nodeset_move only */
	int refs;
	int handles;           /* of the kernel's, open (mbfs_node_handle) */
	bool closing;          /* a releaser is finishing this node */
	bool shared;           /* new opens of path may use this node */
	bool unlinked;         /* never upload */
	bool loaded;           /* fd holds the data */
	bool dirty;
	bool fresh;            /* created here, not on the guest until its
	                          upload (then dirty as well) */
	bool replaces;         /* fresh, renamed to its path: it replaces
	                          whatever the guest has there */
	unsigned mode;         /* fresh: the permission bits to give it */
	uint64_t size;         /* local size once loaded */
	struct timespec mtime; /* time of the last local change */
	uint64_t version;      /* bumped by every local change */
	bool base_known;       /* the guest's (size, mtime) of the clean copy */
	uint64_t base_size;
	time_t base_mtime;
	bool partial;          /* loaded, but some pieces not fetched yet */
	bool overwrote;        /* a write or truncate since the base touched
	                          its first base_size bytes: not only
	                          appends (wbnode.c merges appends) */
	bool recheck;          /* a clean copy the guest's file may have moved
	                          on from (a command ran, its stat changed):
	                          the next read compares, and fetches again
	                          when it did (mbfs_node_read) */
	uint64_t closed_version; /* version a close last queued (wbnode.c) */
	uint64_t durable_version; /* version a close last synced (wbnode.c) */
	bool refetch;          /* ... fetched again whatever the stat says:
	                          a command ran, and may have rewritten it
	                          at the same size within the same second */
	bool kept_any;         /* an upload failed and its data was kept */
	uint64_t kept_version; /* ... for this version */
	char base_sha[65];     /* SHA-256 of our last upload, "" if none */
	struct mbfs_wbq_entry *wbq;  /* its entry in the write-back queue, or
	                               NULL; protected by the queue's lock */
	bool sha_due;          /* base_sha not worked out yet (a large
	                          upload: a pass over it that recovery needs
	                          only once the copy changes again): the copy
	                          holds the upload's base_size bytes until the
	                          next change, whose record (dirty.c) hashes
	                          them first */
	uint64_t times_version; /* mtime was set by utimens (wbnode.c) at
	                          this version; 0: never */
	char guest_id[MBFS_GUEST_ID_MAX]; /* DEVICE:INODE:BIRTH of the file
	                          a clean copy is of, "" when not known
	                          (guestid.c); any local change forgets it,
	                          since its upload makes a new file there */
	bool recorded;         /* the journal holds a record of the copy */
	bool rec_stale;        /* ... for an old path, or no longer wanted
	                          (unlinked): rewrite or drop it */

	/* protected by lock */
	pthread_mutex_t lock;
	int fd;                /* -1 until loaded; closed or replaced only
	                          through mbfs_node_set_fd */
	pthread_rwlock_t fd_rw; /* a read's pread holds it shared without
	                          lock (mbfs_node_read): closing or
	                          replacing fd waits for it, or the number
	                          could be another file's by then */
	char *local;           /* NULL once moved under kept/ */
	bool kept_file;        /* fd is the file moved under kept/: never
	                          change it, take a copy first */
	bool in_memory;        /* fd is a clean copy in memory (data.h), local
	                          NULL: before a change, take a file on disk,
	                          which the journal can keep */
	bool linked;           /* local may be one of two names of one file
	                          (a link made here, mbfs_data_linkfile):
	                          while it is, never change it, take a copy
	                          first */
	struct mbfs_pieces pieces;  /* partial: the guest's pieces */
	unsigned char *have;        /* partial: pieces already in fd */
	size_t missing;
	uint64_t timed_out_ms;   /* when a load last ran out of op_timeout (load.c) */
};

/* Files larger than this are fetched piece by piece as they are read. */
#define LAZY_MIN (8u * MBFS_CHUNK)
/* Pieces fetched beyond the one a read needs (with it: one round of
 * MBFS_XFER_THREADS parallel GETs); SEQ_AHEAD when the read goes on from
 * the pieces before (four rounds), fetched in the background and moving
 * on with the reads (load.c); SEQ_MAX + 1 are cut ahead on the guest. */
#define READ_AHEAD (MBFS_XFER_THREADS - 1)
#define SEQ_AHEAD (4 * MBFS_XFER_THREADS - 1)
#define SEQ_MAX (16 * MBFS_XFER_THREADS - 1)

/* node.c */

/* The node new opens of path would share, or NULL. nodes_lock held. */
struct mbfs_node *mbfs_node_find_shared(struct mbfs *fs, const char *path);
/* A node for path (one reference, shared, not loaded, not listed), or
 * NULL; freed with mbfs_node_destroy (fd, local copy, path) when never
 * listed or once unlisted. */
struct mbfs_node *mbfs_node_alloc(const char *path);
void mbfs_node_destroy(struct mbfs *fs, struct mbfs_node *n);

/* guestfile.c: a clean copy and the guest's file. */

/* n is a clean copy of a guest file that st (the guest's, now) shows
 * changed since n was fetched. nodes_lock held. */
bool mbfs_node_behind(const struct mbfs_node *n, const struct stat *st);
/* A clean copy the guest may have moved on from (recheck): drop it when
 * the guest's file differs from its base (or a command ran: refetch), so
 * that the caller's load fetches it again. n->lock held. */
void mbfs_node_follow_guest(struct mbfs *fs, struct mbfs_node *n);

/* nodeset.c: an upload of path landed, which made a new file there: the
 * identity of every copy of it is unknown again. nodes_lock held. */
void mbfs_node_forget_ids(struct mbfs *fs, const char *path);

/* copyfd.c: the copy's fd and its reads. */

void mbfs_node_fd_init(struct mbfs_node *n);
void mbfs_node_fd_destroy(struct mbfs_node *n);
/* Close n's fd (if any) and make fd its copy, once no read uses the old
 * one. n->lock held. */
void mbfs_node_set_fd(struct mbfs_node *n, int fd);
/* Up to size bytes of fd from off: their count, or -errno. */
int mbfs_node_pread(int fd, char *buf, size_t size, off_t off);
/* The same from n's copy when it is loaded whole and current, without
 * n->lock; -EAGAIN when it is not (the caller loads it first). */
int mbfs_node_pread_ready(struct mbfs *fs, struct mbfs_node *n, char *buf,
			  size_t size, off_t off);

/* dirty.c: a node's changes in the journal; all with n->lock held. */

/* Before a local change of n's data: a copy of its own when its file was
 * moved under kept/ or is shared with a link (an empty one when empty, the
 * change empties it), and a journal record that is current. A full disk
 * first evicts clean copies. 0 or -errno (nothing changed). */
int mbfs_node_will_change(struct mbfs *fs, struct mbfs_node *n, bool empty);
/* The same when only what the record says changes (a path, a mode, a
 * base): a file shared with a link stays shared. */
int mbfs_node_will_record(struct mbfs *fs, struct mbfs_node *n);
/* The data is on the guest, kept, or no longer wanted: forget the record. */
void mbfs_node_unrecord(struct mbfs *fs, struct mbfs_node *n);
/* After a failed upload of the copy of path (as of version): move it under
 * kept/ and say so (one log line naming the file); when that is impossible
 * the node stays dirty, its record and data stay in the journal, and the
 * line says so. */
void mbfs_node_keep(struct mbfs *fs, struct mbfs_node *n, const char *path,
		    uint64_t version, int rc, const struct mb_err *err);
/* Records of nodes whose path moved or that were unlinked (rec_stale) are
 * rewritten or dropped; called after renames and unlinks (no lock held).
 * In node.c: it walks the nodes. */
void mbfs_node_records_sync(struct mbfs *fs);
/* n's stale record (rec_stale taken) rewritten or dropped, unless n is
 * held (then it stays stale for its holder): false. A reference held, no
 * lock (dirty.c). */
bool mbfs_node_settle_record(struct mbfs *fs, struct mbfs_node *n);
/* A disk-full error on the cache: evict clean copies for want bytes.
 * true when something was freed (try again). */
bool mbfs_node_make_room(struct mbfs *fs, int rc, uint64_t want);

/* upload.c, with n->lock held: upload a dirty copy (a fresh node comes
 * into existence on the guest with it). 0 or -errno; on failure the data
 * is kept and the failure logged. */
int mbfs_node_upload(struct mbfs *fs, struct mbfs_node *n);

/* wbnode.c: write-back (wbq.h); called by the flusher, no lock held. */
struct mbfs_wbfile;
/* Take n's copy for a batch into f (path, data, mode, mtime; tag: the
 * version). 1 when taken; 0 when nothing is to be sent (clean, unlinked,
 * already failed and kept, or too large for a batch but still held by
 * others, whose close or release uploads it); -1 when it cannot travel
 * in a batch (upload it with mbfs_node_wb_upload). */
int mbfs_node_wb_take(struct mbfs *fs, struct mbfs_node *n,
		      struct mbfs_wbfile *f);
/* Upload n now, as close did before write-back. 0 or -errno. */
int mbfs_node_wb_upload(struct mbfs *fs, struct mbfs_node *n);
/* The batch holding f ended: rc 0 (the guest has f), else the failure
 * (why: the guest's words); keeps the data when f is still n's latest. */
void mbfs_node_wb_done(struct mbfs *fs, struct mbfs_node *n,
		       const struct mbfs_wbfile *f, int rc, const char *why);
/* A utimens of path whose copy is queued: its mtime travels in the batch.
 * 1 when taken, else 0. */
int mbfs_node_wb_retime(struct mbfs *fs, const char *path,
			const struct timespec *mtime);

/* load.c; all with n->lock held. */

/* Fetch the guest's content unless loaded; whole: also every piece still
 * missing of a partial copy. 0 or -errno. */
int mbfs_load(struct mbfs *fs, struct mbfs_node *n, bool whole);
/* Make the local copy empty (and forget any pieces). */
int mbfs_load_empty(struct mbfs *fs, struct mbfs_node *n);
/* Fetch the missing pieces overlapping [off, off + len) plus read-ahead. */
int mbfs_load_range(struct mbfs *fs, struct mbfs_node *n, uint64_t off,
		    uint64_t len);
/* Forget the guest's pieces of a partial node. */
void mbfs_load_drop_pieces(struct mbfs *fs, struct mbfs_node *n);

/* What the write-back queue asks of the nodes it holds (wbq.h; wbnode.c),
 * given to it at mount. */
extern const struct mbfs_wbq_files mbfs_node_wbq_files;

#endif
