/* mbfs.h: the state one mount shares between its modules.
 *
 * Module map (fuse/), one folder a layer; a folder includes only the
 * folders below it, each through its own headers:
 *   main.c      options, one validation block, the session; wires the
 *               modules together (fs->sink, the queue's node table)
 *   face/       the kernel's and mbexec's way in: ll.c (the FUSE
 *               session; ll_name.c its namespace requests, ll_dir.c open
 *               directories: node numbers to paths through itab.c, the
 *               kernel's inodes, with itab_lock.c's tree locks and
 *               itab_open.c's opens), ops.c (the path operations;
 *               ops_name.c its namespace ops; bound.c bounds each op by
 *               op_timeout), control.c (the control
 *               file), agent.c (mbexec's socket; polls of running commands
 *               in one exec), follow.c (open files and listings follow a
 *               running command), warm.c, help.c
 *   cli/        commands that are no mount: --create, --list, --status,
 *               -u; they reach a mount through its control file only
 *   session/    attach (pin the generation), lease (keep-alive, the
 *               deadline warning), watch (exit once unmounted), recover
 *               (what ended mounts left, at mount)
 *   ns/         namespace changes: ns.c queues them in the outbox or sends
 *               them; hidden.c keeps files unlinked or replaced while open
 *   node/       open files: one shared node per path and its local copy
 *               (node.c; fresh.c: created here; load.c: filling it;
 *               upload.c, dirty.c: uploads and the journal's records;
 *               wbnode.c: the table the outbox reaches nodes through;
 *               guestfile.c: a clean copy following the guest's file;
 *               names.c: renames, unlinks and hides of open nodes)
 *   view/       what a path shows: the cache under the outbox's queued
 *               mkdirs, removals and times (view.c); cachesink.c answers
 *               the outbox's sink (outbox/sink.h) with the cache
 *   bulk/       bulk reads and listings (prefetch, pack, packparse) and
 *               the listings again after a command (relist); never send
 *   outbox/     every change not yet on the sandbox: the write-back queue
 *               (wbq*.c; wbsend.c: a batch's archive, PUTs and apply.sh;
 *               wbq_land.c: what a landed entry does), the times batch
 *               (batch.c), the queued mkdirs and removals (newdir.c,
 *               gone.c), the record of what an ended mount did not send
 *               (unsent*.c). It tells results and asks what a path shows
 *               through fs->sink only: no node, cache or view header
 *   cache/      what the mount remembers of the sandbox (cache.c,
 *               cache_tab.c, cache_own.c), of the kernel (kcache.c), and
 *               the inode numbers (inode.c)
 *   transport/  requests: remote.c (paths, failures, exec-based ops),
 *               exec.c, xfer*.c (chunked transfers), touch.c, tarread.c,
 *               report.c (apply.sh's report), name.c (names the guest can
 *               take)
 *   durable/    local disk only: journal*.c (records, staging, kept/, the
 *               outbox log, the replay, the group commit), data.c (local
 *               copies), fdio.c
 *   guest/      the guest scripts, the transport's protocol
 *
 * Threads: libfuse runs requests on several threads. Transfers add up to
 * MBFS_XFER_THREADS workers (xfer.c), a reader's fetch going on
 * (xfer_ahead.c, xfer_pieces.c) and an upload's hashing (xfer_up.c).
 * batch.c and wbq.c run one flusher each, hidden.c one remover, lease.c
 * one keep-alive thread, kcache.c one invalidating thread, follow.c one
 * thread while a command runs, agent.c one accepting, one polling and one
 * per mbexec connection, watch.c one watcher.
 * Lock order (a thread holding one lock only takes locks further right):
 *   itab->lock  ->  fs->nodes_lock (mbfs_itab_lend_fh's hold only; a
 *   tree lock (itab_lock.c) is waited for on itab->lock, and held by a
 *   request across its path operation, like node->lock, never across
 *   another request)
 *   node->lock  ->  node->fd_rw
 *   node->lock  ->  fs->nodes_lock  ->  cache->lock
 *   hidden->lock  ->  fs->nodes_lock
 *   fs->nodes_lock  ->  wbq->lock
 *   wbq->lock  ->  newdirs->lock, gone->lock
 *   wbq->lock  ->  journal->oplock  ->  journal->lock (the outbox log)
 *   journal->oplock  ->  journal->clock (the group commit's; no sync is
 *   made under it, and its waiters hold no other lock but a node->lock)
 *   Leaves: data->lock, prefetch->lock, relist->lock, batch->lock,
 *   lease->lock, inos->lock, kcache->lock, agent->mu, follow->mu, an
 *   upload's and a fetch's lock (xfer_up.c, xfer_fetch.h), and the file
 *   locks statfs_lock, watch_lock, prev_lock (wbsend.c), unsent_lock,
 *   seen_lock (name.c). follow.c holds none while it asks the guest or
 *   calls the nodes; the outbox calls fs->sink with none of its own.
 * node->lock may be held across network calls (and across waiting for a
 * batch send), and so may a request's tree locks (not a mutex: a count
 * on the nodes of its path); no other lock ever is.
 * Inode numbers: use_ino, st_ino = mbfs_ino() of the path, so they stay
 * the same across lookups and mounts (git's index compares them), and
 * across renames made through the mount (inode.c).
 * Errors: every op returns -errno and never exits; only main() exits.
 */
#ifndef MBFS_H
#define MBFS_H

#define FUSE_USE_VERSION 312

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
struct mbfs_out_sink;

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
	char *umask;            /* -o umask=M (octal) */
	int direct_io;          /* -o direct_io */
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
	const struct mbfs_out_sink *sink; /* the outbox's results and
	                                   questions (outbox/sink.h) */
	bool sync_close;                /* close() uploads and waits */
	bool set_mode;                  /* -o umask: */
	mode_t umask;                   /* ... every file shows 0777 & ~umask */
	bool direct_io;                 /* -o direct_io */
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
