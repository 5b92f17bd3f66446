/* journal_int.h: the inside of the journal, shared by journal.c (run
 * directory, records, kept/), journal_replay.c (the replay of ended
 * mounts), journal_outbox.c (the outbox log), journal_stage.c (staging
 * notes), journal_text.c (their texts, written whole) and
 * journal_commit.c (group commit). Not for other modules. */
#ifndef MBFS_JOURNAL_INT_H
#define MBFS_JOURNAL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "common/ident.h"

struct mbfs_jrec;
struct mbfs_jreplay;

#define REC_SUFFIX ".rec"
#define REC_XATTR "user.mbfs.rec."  /* + the copy's name: its record */
#define REC_KEY_MAX 256
#define STG_SUFFIX ".stg"
#define TMP_SUFFIX ".tmp"
#define LOCK_NAME "lock"
#define OUTBOX_NAME "outbox"
#define RUN_PREFIX "run."
#define REC_MAX 65536   /* a record is a path and a few numbers */

struct kept {
	struct kept *next;
	char *rpath, *file, *why;
};

struct stage {
	struct stage *next;
	unsigned id;
	char **paths;
	size_t n;
	bool leftover;          /* its removal failed; not handed out */
};

struct mbfs_journal {
	char *dir, *run, *keptdir;
	int lockfd;
	char api_url[MB_URL_MAX];
	struct mb_ident who;
	pthread_mutex_t lock;   /* a leaf lock: never held across file I/O
	                           of records or the network */
	struct kept *kept;      /* newest first; protected by lock */
	struct stage *stages;   /* protected by lock */
	unsigned next_id;       /* protected by lock */
	/* the outbox log (journal_outbox.c) */
	pthread_mutex_t oplock; /* held across its appends (local only) */
	int opfd;               /* -1 until the first op */
	size_t ops_pending;     /* noted, not done; protected by oplock */
	bool op_failed;         /* an append failed (logged once) */
	int runfd;              /* the run directory, for its fsync */
	/* group commit (journal_commit.c): tickets asked and covered */
	pthread_mutex_t clock;  /* a leaf lock, never held across a sync */
	pthread_cond_t cdone;
	uint64_t c_entered, c_left;   /* callers that came, and returned */
	uint64_t c_asked;       /* the last ticket given */
	uint64_t c_done;        /* every ticket up to this is on disk */
	uint64_t c_syncs;       /* shared syncs made */
	uint64_t c_gen;         /* bumped by each outbox line written */
	uint64_t c_gen_synced;  /* the c_gen the last shared sync began at */
	uint64_t c_bad_lo, c_bad_hi;   /* the tickets failed syncs covered,
	                                  from the first failure on (none
	                                  yet: 0, 0) */
	bool c_running;         /* a caller is syncing for the others */
	bool c_failed;          /* a sync failed (logged once) */
};

/* journal_commit.c's state, made and freed with the journal. */
void mbfs_journal_commit_init(struct mbfs_journal *j);
void mbfs_journal_commit_destroy(struct mbfs_journal *j);
/* An outbox line was written: the next commit syncs the log. */
void mbfs_journal_commit_dirty(struct mbfs_journal *j);

/* The outbox log of an ended mount's run directory dir, to ops->outbox;
 * removed when handled. *foreign: it is another container's. */
void mbfs_journal_replay_outbox(struct mbfs_journal *j, const char *dir,
				const struct mbfs_jreplay *ops, bool *foreign);

/* journal.c's helpers for the replay (journal_replay.c). */
bool mbfs_journal_ends_with(const char *s, const char *suffix);
/* The whole small file at path (malloc'd, NUL-terminated) or NULL. */
char *mbfs_journal_read_small(const char *path);
int mbfs_journal_parse_rec(const char *text, struct mbfs_jrec *r);
/* A data file's record attribute (malloc'd) or NULL; has: is there one? */
char *mbfs_journal_read_rec_xattr(const char *local);
bool mbfs_journal_has_rec_xattr(const char *local);
/* Remove every file in dir that is not needed: with keep_state, records,
 * their data, staging lists, the outbox and the lock stay. *left: files
 * still there. */
void mbfs_journal_sweep_dir(const char *dir, bool keep_state, size_t *left);
/* Remove the run directory dir when nothing in it is still needed. */
void mbfs_journal_close_dir(const char *dir);
/* Parse an owner object's fields into r; false when one is missing. */
bool mbfs_journal_parse_owner(const cJSON *o, struct mbfs_jrec *r);
bool mbfs_journal_same_container(const struct mbfs_journal *j,
				 const struct mbfs_jrec *r);

/* Write text to path through path.tmp and a rename. 0 or -errno. */
int mbfs_journal_write_file(const char *path, const char *text);
/* Add apiUrl, id and createdAt of j's container to o. */
void mbfs_journal_owner_json(const struct mbfs_journal *j, cJSON *o);
/* Free every staging note in memory (at close; the files stay). */
void mbfs_journal_free_stages(struct mbfs_journal *j);

#endif
