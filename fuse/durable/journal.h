/* journal.h: the mount's durable local state: data written here that the
 * guest does not have yet, and what could not be sent.
 *
 * The cache directory DIR belongs to one container; every mount of it on
 * this machine uses it:
 *   DIR/run.<hex>/  one per running mount, locked (flock of run.<hex>/lock)
 *                   for the mount's whole life. data.c keeps the mount's
 *                   working and clean copies there. Next to a working copy
 *                   F whose changes the guest has not got, F.rec says where
 *                   they go and what they were written against (struct
 *                   mbfs_jrec); N.stg lists guest paths an upload staged and
 *                   has not removed yet.
 *   DIR/kept/<guest path>.<time>.<hex>
 *                   data that could not be uploaded; mbfs never removes it.
 * A record is written (to a temporary name, then renamed) before the first
 * change of a copy and removed once the data is on the guest or under
 * kept/. A run.* directory whose lock is free was left by a mount that
 * ended without cleaning up (kill -9, a crash, a power cut):
 * mbfs_journal_replay hands its records and staging lists to the caller
 * (recover.c) and removes the rest. Data moves under kept/ by rename, never
 * by copy, so keeping needs no free space and cannot truncate anything.
 * Durability: a crash of mbfs loses nothing (the kernel has every byte);
 * a close() of a file written through the mount returns once its copy,
 * its record and every outbox line before it are on disk
 * (mbfs_journal_commit), so a power cut loses none of them either.
 * Never touches the network. Thread-safe.
 */
#ifndef MBFS_JOURNAL_H
#define MBFS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"
#include "common/ident.h"

struct mbfs_journal;

/* Where a dirty copy goes and what it was written against. */
struct mbfs_jrec {
	char api_url[MB_URL_MAX];  /* the container: filled by the journal */
	struct mb_ident ident;
	char rpath[MB_PATH_MAX];   /* guest path of the file */
	bool fresh;                /* created here: no file was there */
	unsigned mode;             /* fresh: the permission bits to give it */
	bool base_known;           /* not fresh: the guest's file it replaces */
	uint64_t base_size;
	time_t base_mtime;         /* whole seconds, as the guest reports */
	char base_sha[65];         /* its SHA-256 when known, else "" */
};

/* Open the journal of this mount under dir (created 0700 when missing):
 * a new locked run directory. 0 with *out, or -errno with err. */
int mbfs_journal_open(const char *dir, const char *api_url,
		      const struct mb_ident *who, struct mbfs_journal **out,
		      struct mb_err *err);
/* At exit: removes the run directory unless a record or staging list is
 * still in it (a later mount replays those); frees j. */
void mbfs_journal_close(struct mbfs_journal *j);

/* What a close() waits for: the working copy fd (its data, its record,
 * an attribute of it, and on a journaling file system its name; -1: none)
 * synced, then, when an outbox line was written since the last such sync,
 * the run directory and the outbox log. Callers at once share that second
 * sync (group commit): one that begins after their call, made by the
 * first caller while the others wait. 0, or -EIO when a sync that
 * covered this call failed (logged once). */
int mbfs_journal_commit(struct mbfs_journal *j, int fd);
/* For the control file: callers that came, callers that returned, and
 * the shared syncs made for them. */
void mbfs_journal_commits(struct mbfs_journal *j, uint64_t *entered,
			  uint64_t *left, uint64_t *syncs);

/* The run directory, for data.c's files. */
const char *mbfs_journal_run_dir(const struct mbfs_journal *j);
/* DIR/kept, where data that could not be uploaded goes. */
const char *mbfs_journal_kept_dir(const struct mbfs_journal *j);

/* Write (or replace) the record of the working copy local; r's owner
 * fields are filled here. 0 or -errno (ENOSPC: the caller may free space
 * and try again). */
int mbfs_journal_put(struct mbfs_journal *j, const char *local,
		     const struct mbfs_jrec *r);
/* Remove the record of local (its data is on the guest, kept, or no longer
 * wanted). 0, or -errno when a record may be left (logged). */
int mbfs_journal_drop(struct mbfs_journal *j, const char *local);

/* Move the file local under DIR/kept/, named after rpath (NULL: unknown),
 * by rename; an open fd of it stays valid. why says why, for the control
 * file. The new path goes to out (outsz bytes). 0 or -errno (nothing
 * moved). */
int mbfs_journal_keep(struct mbfs_journal *j, const char *local,
		      const char *rpath, const char *why, char *out,
		      size_t outsz);
/* What this mount kept, as a JSON array of {"path","file","reason"}
 * (malloc'd), or NULL when nothing was kept. */
char *mbfs_journal_kept_json(struct mbfs_journal *j);

/* Before an upload stages anything on the guest: note the guest paths
 * (count of them) that will need removing; *id names the note. 0 or
 * -errno. */
int mbfs_journal_stage(struct mbfs_journal *j, const char *const *paths,
		       size_t count, unsigned *id);
/* The staging of id is gone from the guest (removed, or renamed into
 * place): the note goes. */
void mbfs_journal_unstage(struct mbfs_journal *j, unsigned id);
/* Its removal failed: the note stays, listed by mbfs_journal_leftovers. */
void mbfs_journal_leftover(struct mbfs_journal *j, unsigned id);
/* The guest paths of every leftover (a malloc'd array of count
 * malloc'd strings, and the ids, malloc'd), or 0 with *count 0. Each
 * leftover is returned by one call only: unstage it when removed, or mark
 * it leftover again. */
int mbfs_journal_leftovers(struct mbfs_journal *j, char ***paths,
			   size_t *count, unsigned **ids, size_t *nids);

/* The outbox log: the changes queued for the guest that are not a file's
 * data (a file's record says those): mkdirs, directory times and modes,
 * removals, in the order they were queued, one line each appended to
 * DIR/run.<hex>/outbox, so that a kill -9 or a crash loses none of them. */
struct mbfs_jop {
	char kind;                 /* 'M' mkdir, 'T' mtime, 'C' chmod,
	                              'r' unlink, 'R' rmdir, 'v' move,
	                              'p' a file's chmod */
	char rpath[MB_PATH_MAX];   /* guest path */
	char rto[MB_PATH_MAX];     /* v: the guest path it moves to */
	char mv_id[17];            /* v: its name for good (hex) */
	char ledger[64];           /* v: the batch directory whose ledger
	                              says it is done (wbsend.h) */
	unsigned mode;             /* M, C, p: permission bits */
	struct timespec mtime;     /* T */
	bool base_known;           /* r: the file it removes */
	uint64_t base_size;
	time_t base_mtime;
};

/* Note op as *id; with *id non-zero (an earlier call's), op replaces what
 * that id said and keeps its place. 0, or -errno (not noted: a crash
 * would lose it; the caller goes on, logged once). Never waits for
 * anything but the local disk. */
int mbfs_journal_op(struct mbfs_journal *j, const struct mbfs_jop *op,
		    unsigned *id);
/* The change noted as id is on the guest, or no longer wanted. */
void mbfs_journal_op_done(struct mbfs_journal *j, unsigned id);

/* What the replay asks for each thing an ended mount left. */
enum mbfs_jact {
	MBFS_J_LEAVE,   /* not now: a later mount finds it again */
	MBFS_J_DONE,    /* handled: the journal forgets it */
	MBFS_J_LATER,   /* a dirty copy: decided by flush, with others */
};

struct mbfs_jreplay {
	/* A dirty copy: its data file local (may be renamed away, e.g. by
	 * mbfs_journal_keep) and its record, NULL when the record is
	 * unreadable (a power cut while it was written). */
	enum mbfs_jact (*dirty)(void *ud, const char *local,
				const struct mbfs_jrec *rec);
	/* Guest paths staged by an upload of container owner. */
	enum mbfs_jact (*staged)(void *ud, const struct mbfs_jrec *owner,
				 const char *const *paths, size_t count);
	/* The outbox log's changes not yet done, in order (count > 0),
	 * handed out before the run directory's records. */
	enum mbfs_jact (*outbox)(void *ud, const struct mbfs_jrec *owner,
				 const struct mbfs_jop *ops, size_t count);
	/* After the run directory's records, while it is still held: the
	 * count dirty copies dirty answered LATER for, in that order, get
	 * their acts (DONE or LEAVE) into acts. The files named to dirty
	 * stay where they were until it returns. */
	void (*flush)(void *ud, enum mbfs_jact *acts, size_t count);
	void *ud;
};

/* Hand every record and staging list of this container left by ended
 * mounts to ops (one at a time, from this thread), then remove what is
 * handled and every clean copy. Run directories of another container (a
 * cache_dir shared on purpose) are left alone. 0 or -errno. */
int mbfs_journal_replay(struct mbfs_journal *j,
			const struct mbfs_jreplay *ops);

#endif
