/* wbsend.h: the transport of write-back batches (wbq.h): a batch of small
 * files travels as one tar archive PUT in 1 MiB pieces into the guest's
 * /tmp/.mbfs-up/ and one exec of fuse/guest/apply.sh, which unpacks it
 * into a hidden directory of the mounted directory and renames each file
 * into place (atomic per file), with its mode and mtime; directories
 * queued for it are made first. Requests per
 * batch: ceil(archive / 1 MiB) PUTs and one exec (one mkdir more when
 * /tmp/.mbfs-up is missing).
 *
 * Transient failures (5xx, 429, resets, timeouts) are retried until the
 * batch has made no progress for op_timeout; the exec is repeatable (a
 * rerun after a lost answer prints the first run's report). The staging
 * is noted in the journal first, so a crash or a failure leaves nothing
 * on the guest for long (journal.h, mbfs_xfer_sweep).
 *
 * Knows nothing of nodes or of the queue: it moves bytes and reports per
 * file. Called by the write-back flusher, and by a node's own upload of a
 * file of up to 1 MiB (fsync, sync_close: a batch of one, so that the
 * guest checks its way as for any batch); two batches may run at once.
 */
#ifndef MBFS_WBSEND_H
#define MBFS_WBSEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"

struct mbfs;

/* One file of a batch; filled by the caller, rc and why by mbfs_wbsend. */
struct mbfs_wbfile {
	char *path;          /* mount-relative, malloc'd by the caller */
	char *data;          /* len bytes, malloc'd by the caller */
	size_t len;
	unsigned mode;       /* permission bits it gets */
	bool keep_mode;      /* unless it replaces a file: then that one's
	                        (a replay after a crash, which does not know
	                        the sandbox's mode) */
	struct timespec mtime;   /* exact: it travels in a pax record */
	/* what the guest's file must still be for this one to replace it
	 * (else it is a conflict: the guest's stays, this one fails) */
	enum { MBFS_BASE_ANY, MBFS_BASE_ABSENT, MBFS_BASE_STAT } base;
	uint64_t base_size;      /* STAT: its size and whole-second mtime */
	time_t base_mtime;
	uint64_t tag;        /* the caller's (not sent) */
	int rc;              /* 0: in place; else -errno */
	char why[160];       /* for a failure: what the guest said */
};

/* What a batch does to a name besides sending a file: a directory's
 * changes, and removals. */
enum mbfs_wbdir_kind {
	MBFS_WBDIR_TIME,     /* mtime, set again once the files before it are
	                        in place (their renames moved it) */
	MBFS_WBDIR_MAKE,     /* mkdir with mode, before any file moves */
	MBFS_WBDIR_MODE,     /* chmod to mode, after the files before it */
	MBFS_WBDIR_RM,       /* unlink a file or symlink, before everything
	                        else of the batch */
	MBFS_WBDIR_RMDIR,    /* rmdir, likewise (after the removes before it) */
	MBFS_WBDIR_MV,       /* rename the file path over to, likewise */
	MBFS_WBDIR_CHMOD,    /* give the file path mode, likewise */
};

/* Does an entry of kind go before everything else of its batch (a
 * removal or a move)? A batch keeps the order of its entries only when
 * these come first, so one is never sent after an entry of another kind
 * in the same batch. */
static inline bool mbfs_wbdir_removes(enum mbfs_wbdir_kind kind)
{
	return kind == MBFS_WBDIR_RM || kind == MBFS_WBDIR_RMDIR ||
	       kind == MBFS_WBDIR_MV || kind == MBFS_WBDIR_CHMOD;
}

struct mbfs_wbdir {
	char *path;          /* mount-relative, the caller's */
	char *to;            /* MV: the new name, likewise */
	char mv_id[17];      /* MV: its name for good (hex), so that no
	                        rerun does it twice (apply.sh's ledger) */
	const char *ledger;  /* MV: a killed mount's batch directory, whose
	                        ledger may hold it already; NULL: none */
	enum mbfs_wbdir_kind kind;
	struct timespec mtime;   /* TIME */
	unsigned mode;           /* MAKE, MODE, CHMOD: permission bits */
	bool doubt;              /* MAKE: an earlier batch whose answer was
	                            lost may have made it: a real directory
	                            there counts as made */
	/* RM, CHMOD: what the guest's file must still be for it to go (else
	 * it is a conflict: it stays as it is and the change fails) */
	bool base_known;
	uint64_t base_size;
	time_t base_mtime;       /* whole seconds */
	bool one_file;       /* MV, by mbfs_wbsend: the two names were one
	                        file (hard links), so both stay (rc 0) */
	int rc;              /* MAKE, RM, RMDIR, MV, CHMOD: 0 done (made, or there
	                        already as a directory; removed, or gone
	                        already; moved), else -errno; by
	                        mbfs_wbsend */
	char why[160];       /* for a failure: what the guest said */
};

/* Can path travel in a batch? (Its name fits a tar header and the list:
 * at most 99 bytes, no newline anywhere in the path.) */
bool mbfs_wbsend_fits(const char *path);

/* Send the n files of v (distinct paths) as one batch with the nd
 * directory changes of dv: the RMs, RMDIRs, MVs and CHMODs first, in
 * dv's order
 * (each path's way checked for symlinks as a file's is), then the MAKEs, in
 * dv's order (a parent before what is made in it), then the files, then the TIMEs and MODEs in dv's
 * order (best effort: `touch -c`, `chmod`; a failure is not reported).
 * 0 when the guest ran it: v[i].rc and the MAKEs', RMs' and RMDIRs' rc
 * tell each outcome;
 * -errno when the batch as a whole failed (nothing is known to be in
 * place; err says why, after mbfs_fail). */
int mbfs_wbsend(struct mbfs *fs, struct mbfs_wbfile *v, size_t n,
		struct mbfs_wbdir *dv, size_t nd, struct mb_err *err);

/* The mount's batch directory (/tmp/.mbfs-wb-RANDOM, whose ledger the
 * moves a batch does go in) into out, named and noted in the journal now
 * if not yet: a move queued now notes it, for a replay after a crash. 0
 * or -errno. */
int mbfs_wbsend_ledger(struct mbfs *fs, char out[64]);

/* At unmount, after the last batch: remove the mount's batch directory
 * (/tmp/.mbfs-wb-RANDOM: the report the last batch left for a rerun, and
 * what failures left; one request, best effort; its journal note goes
 * once it is gone, else the next mount removes it). */
void mbfs_wbsend_finish(struct mbfs *fs);

#endif
