/* mbfs.h: the state one mount shares between its modules.
 *
 * Module map (fuse/):
 *   main.c     options (fuse_opt), one validation block, session
 *              (fuse_new / mount / daemonise / loop / unmount)
 *   create.c   `mbfs --create`: keyed container creation with a saved key
 *   attach.c   before mounting: pin the generation, read its deadlines,
 *              make the default /workspace when the image has none
 *   lease.c    while mounted: keep-alive calls against the idle timeout,
 *              one warning before the hard deadline
 *   ops.c      the fuse_operations table: thin translation to the modules
 *   bound.c    that table, each operation bounded by one op_timeout deadline
 *   cache.c    attribute / listing / negative cache (decorator over the
 *              stat and list routes, with a write counter); our own
 *              changes applied in place; cache_tab.c is its table
 *   node.c     open files: one shared node per path, local working copy,
 *              dirty state
 *   fresh.c    files created here: a node until their first upload
 *   upload.c   a node's upload on flush/fsync/release/unmount, and what
 *              the mount knows afterwards without asking
 *   batch.c    utimens queued and sent in batches by a flusher thread;
 *              touch.c builds and runs the touch scripts
 *   wbq.c      write-back, the outbox: small files closed dirty and the
 *              other names' changes (wbq_dir.c: mkdirs, modes, times,
 *              removals), queued in order and sent in batches by a
 *              flusher thread (wbq_send.c: one batch; wbq_land.c: what a
 *              landed entry does; wbsend.c: the archive, its PUTs and
 *              apply.sh). The queue calls the nodes only through the
 *              table wbnode.c gives it (what a batch does to a node).
 *              status.c prints the queue (`mbfs --status`); newdir.c and
 *              gone.c: the mkdirs and removals queued, as the view
 *              (view.c) shows them
 *   load.c     filling a node's copy: data cache, whole file, or piece by
 *              piece as reads need it (node_int.h is the node's inside)
 *   dirty.c    a node's changes in the journal; keeping failed uploads
 *   journal.c  durable local state: records of dirty copies, staging
 *              notes, kept/ (the cache directory's layout); the outbox
 *              log (journal_outbox.c); the replay of ended mounts
 *              (journal_replay.c)
 *   recover.c  at mount: what ended mounts left in their journals
 *   prefetch.c bulk reads: a directory's small files in one archive
 *              built on the guest (tarread.c reads it) into data.c
 *   data.c     local copies: clean ones (evicted as the disk fills) and
 *              working ones, in the mount's run directory
 *   xfer.c     chunked transfer: the worker pool; downloads (xfer_get.c,
 *              their pieces xfer_pieces.c, a reader's fetch going on
 *              xfer_ahead.c); xfer_up.c: staged atomic uploads, retried
 *              while they make progress
 *   ns.c       namespace changes through the metadata routes
 *   remote.c   path mapping, failure reporting, exec-based operations;
 *              exec.c sends one command (inline, or as a script file)
 *   control.c  the virtual control file MOUNTPOINT/.mainbrella
 *   follow.c   open files follow the guest while a command runs
 *   watch.c    exit when unmounted while other namespaces hold copies
 *   kcache.c   what the kernel caches (names, attributes, pages): the
 *              paths it was shown, invalidated by a thread of its own
 *   name.c     names the guest can take (UTF-8, 255 bytes)
 *   inode.c    inode numbers, kept across renames
 *   hidden.c   files unlinked or replaced while open
 *
 * Threads: libfuse runs ops on several threads; transfers add up to
 * MBFS_XFER_THREADS helpers; batch.c and wbq.c run one flusher each,
 * lease.c one keep-alive thread, kcache.c one invalidating thread,
 * follow.c one thread asking about open files while a command runs.
 * Lock order (a
 * thread holding one lock only takes locks further right):
 *   node->lock  ->  fs->nodes_lock  ->  cache->lock
 *   hidden->lock  ->  fs->nodes_lock
 *   fs->nodes_lock  ->  wbq->lock
 *   wbq->lock  ->  newdirs->lock, gone->lock
 *   wbq->lock  ->  journal->oplock  ->  journal->lock (the outbox log)
 *   data->lock, prefetch->lock, batch->lock, wbq->lock, lease->lock, statfs_lock,
 *   watch_lock, kcache->lock, follow->mu and the journal's lock are leaves
 *   (follow.c holds none while it asks the guest or calls the nodes).
 * node->lock may be held across network calls (and across waiting for a
 * batch send); no other lock ever is.
 * Inode numbers: use_ino, st_ino = mbfs_ino() of the path, so they stay
 * the same across lookups and mounts (git's index compares them), and
 * across renames made through the mount (inode.c).
 * Errors: every op returns -errno and never exits; only main() exits.
 */
#ifndef MBFS_H
#define MBFS_H

#define FUSE_USE_VERSION 31

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "common/api.h"
#include "common/err.h"
#include "common/ident.h"

struct mbfs_batch;
struct mbfs_wbq;
struct mbfs_newdirs;
struct mbfs_gone;
struct mbfs_nodeset;
struct mbfs_cache;
struct mbfs_data;
struct mbfs_journal;
struct mbfs_hidden;
struct mbfs_inos;
struct mbfs_follow;
struct mbfs_kcache;
struct mbfs_lease;
struct mbfs_node;
struct mbfs_prefetch;
struct mbfs_relist;
struct mbfs_warm;

/* The remote directory mounted when none is given, and the one directory
 * mbfs creates when it is missing (the default node image has none). */
#define MBFS_DEFAULT_ROOT "/workspace"

struct mbfs_opts {
	char *spec;             /* CONTAINER[@GEN][:DIR] */
	char *mountpoint;
	char *api_url;
	char *key_file;
	char *profile;          /* -o profile, --profile */
	char *cache_dir;
	char *log_file;
	char *attr_timeout, *dir_timeout, *negative_timeout, *op_timeout;
	char *keepalive;
	char *uid, *gid;
	char *catalog, *size;   /* --create */
	int create;
	int ro;
	int sync_close;         /* -o sync_close */
	char *bulk_read;        /* -o bulk_read=0|1 */
	int show_help, show_version;
	int verbose;            /* -v, --verbose: how many */
	int foreground, debug, singlethread;
};

struct mbfs {
	struct mb_client *client;       /* thread-safe */
	struct mb_ident ident;
	char root[MB_PATH_MAX];         /* remote directory, no trailing '/'
	                                   ("" when the guest's / is mounted) */
	char mountpoint[MB_PATH_MAX];   /* absolute local path */
	char api_url[MB_URL_MAX];
	char *control_json;             /* built at init, never changes */
	size_t control_len;

	uint64_t attr_ms, dir_ms, neg_ms;
	uint64_t op_ms;                 /* bound on one API call, retries incl.;
	                                   an upload gives up after this long
	                                   without progress */
	uint64_t keepalive_ms;          /* idle this long: one renewing call;
	                                   0: never (lease.h) */
	char expires_at[MB_GEN_MAX];    /* the generation's hard deadline,
	                                   "" when the service did not say */
	time_t expires_sec;             /* the same in Unix seconds, or 0 */
	uid_t uid;
	gid_t gid;
	bool ro;
	bool log_requests;              /* -v: a log line per HTTP attempt */

	struct mbfs_cache *cache;
	struct mbfs_data *data;
	struct mbfs_journal *journal;   /* the cache directory's durable
	                                   state (journal.h) */
	struct mbfs_batch *batch;
	struct mbfs_wbq *wbq;           /* write-back of small files (wbq.h) */
	struct mbfs_newdirs *newdirs;   /* mkdirs queued there (newdir.h) */
	struct mbfs_gone *gone;         /* removals queued there (gone.h) */
	bool sync_close;                /* close() uploads and waits */
	struct mbfs_prefetch *prefetch; /* bulk reads (prefetch.h); NULL:
	                                   off */
	struct mbfs_relist *relist;     /* listings again after a command
	                                   (relist.h); NULL: off */
	struct mbfs_lease *lease;       /* NULL until mbfs_lease_start */
	struct mbfs_kcache *kcache;     /* the kernel's caches (kcache.h) */
	struct mbfs_inos *inos;         /* numbers kept across renames
	                                   (inode.h); NULL: plain hashes */
	struct mbfs_hidden *hidden;     /* files gone while open (hidden.h) */
	struct mbfs_warm *warm;         /* what the kernel may skip, and the
	                                   requests counted (warm.h) */
	struct mbfs_agent *agent;       /* mbexec's socket (agent.h); NULL
	                                   when none */
	char agent_name[MB_AGENT_NAME_MAX]; /* in the control file; "" none */
	struct mbfs_follow *follow;     /* open files following the guest
	                                   while a command runs (follow.h);
	                                   NULL when none */
	char cache_dir[MB_PATH_MAX];    /* -o cache_dir or the default */
	struct cJSON *unsent;           /* what an ended mount did not send
	                                   (unsent.h), or NULL; with
	                                   unsent_warned, unsent.c's lock */
	bool unsent_warned;             /* mbexec has said so */

	pthread_mutex_t nodes_lock;
	struct mbfs_nodeset *nodes;     /* open files (nodeset.h); protected
	                                   by nodes_lock */

	atomic_int stopped;             /* generation gone: fail fast */
	atomic_int stop_logged;
	atomic_int deadline_warned;     /* the hard-deadline warning is out */
	_Atomic uint64_t up_sent;       /* bytes of the uploads running now
	                                   PUT so far (xfer_up.c; wbq_up.c) */
};

extern struct mbfs *mbfs_fs;

/* Path of a mount-relative path ("/a/b") on the guest, into out (MB_PATH_MAX).
 * -ENAMETOOLONG when too long. */
int mbfs_remote_path(const struct mbfs *fs, const char *path, char *out);

/* Report the outcome of a call to common/: 0 stays 0; a stopped generation
 * switches the mount to fail-fast mode (one log line). Returns the -errno
 * a FUSE op should return. */
int mbfs_fail(struct mbfs *fs, int rc, const struct mb_err *err);

/* FNV-1a of the bytes of s, continuing from h (start with
 * MBFS_FNV_OFFSET). */
#define MBFS_FNV_OFFSET 1469598103934665603ULL
uint64_t mbfs_fnv1a(uint64_t h, const char *s);

/* The inode number of a mount-relative path (inode.c): 1 for the mount's
 * root, else a 64-bit hash of the guest path, never 0 or 1. Stable across
 * lookups and remounts, so `git status` does not see every file change;
 * a rename made through the mount keeps the number (inode.h). Trade-offs:
 * hard links show different numbers, and two paths may (very rarely)
 * share one. */
uint64_t mbfs_ino(const struct mbfs *fs, const char *path);

/* -ENOTCONN when the generation is gone, else 0. */
int mbfs_check_alive(struct mbfs *fs);

/* Build a struct stat from an API entry for this mount. */
void mbfs_entry_stat(const struct mbfs *fs, const struct mb_entry *e,
		     struct stat *st);

#endif
