/* xfer.h: moving whole files between a local fd and the guest.
 *
 * Downloads (xfer_get.c): up to 1 MiB with one GET; larger files are cut on
 * the guest into 1 MiB pieces in a private /tmp directory as they are
 * fetched with parallel GETs: while some threads GET the pieces cut so far,
 * one cuts the next ones (an exec, fuse/guest/split.sh, that also removes
 * the pieces fetched since the last), so the guest's pass over the file
 * overlaps the transfers and /tmp never holds a second copy of it; the
 * directory is removed after the last piece. A sequential reader's fetch
 * returns once the pieces it needs are in and goes on in the background,
 * growing as the reader moves on (mbfs_xfer_fetch_start).
 * Uploads (xfer_up.c): up to 1 MiB with one PUT (atomic on the guest);
 * larger files are PUT as parts into a fresh private staging directory in
 * the guest's /tmp (/tmp/.mbfs-up-HEX, a random name made with mode 0700
 * by a mkdir that fails on a name taken: never in the user's tree, never
 * through a planted symlink; the scripts check it before use); while later parts
 * are PUT, rounds (one exec each) check the parts PUT so far against the
 * SHA-256 of each computed here and write them into a hidden file next to
 * the target (.mbfs-up-HEX, for the upload's time); the last exec does
 * the same for the tail, checks the size, gives a file created here its
 * mode (else keeps the target's) and renames it over the target with
 * `mv -fT`: no program on the guest ever sees a half-written file; each
 * exec refuses (-ELOOP) a target whose way down from the mounted directory
 * passes through a symlink (fuse/guest/join.sh). Every
 * transient failure (a 5xx, a reset, a timeout) is reconciled (the target
 * read back or hashed, never a blind repeat) and retried until the upload
 * has made no progress for op_timeout. The staging of an upload, and a download's pieces, are
 * noted in the journal before they exist and removed after; what a
 * failure or a crash left is removed when the service answers again
 * (mbfs_xfer_sweep) or at the next mount.
 * Paths are mount-relative unless named rpath. Thread-safe; the client's
 * limiter bounds the requests in flight.
 */
#ifndef MBFS_XFER_H
#define MBFS_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct mbfs;

#define MBFS_CHUNK 1048576u
#define MBFS_XFER_THREADS 4

/* Fetch path into fd (empty, O_RDWR) starting at offset 0; size_hint
 * picks the method. *size_out: bytes written. 0 or -errno (already passed
 * through mbfs_fail), with err->msg saying what failed. */
int mbfs_xfer_download(struct mbfs *fs, const char *path, uint64_t size_hint,
		       int fd, uint64_t *size_out, struct mb_err *err);

/* Where a piece of a file being cut is (mbfs_pieces.state). */
enum mbfs_piece_state {
	MBFS_PIECE_UNCUT,
	MBFS_PIECE_CUTTING,
	MBFS_PIECE_CUT,       /* on the guest, not fetched (or wanted again) */
	MBFS_PIECE_FETCHED,   /* fetched, on the guest until the next cut */
	MBFS_PIECE_GONE,      /* removed after its fetch */
};

/* A file in MBFS_CHUNK pieces (the last may be shorter) in a private
 * directory on the guest, for fetching piece by piece. Fetches of one
 * mbfs_pieces do not overlap (the caller serialises them). */
struct mbfs_pieces {
	char dir[4096];
	uint64_t *sizes;
	size_t n;
	uint64_t total;
	unsigned note;    /* the journal's note of dir (0: none) */
	/* mbfs_xfer_split: the pieces are cut from src as fetches need them;
	 * state (n of enum mbfs_piece_state) and src live in sizes' block,
	 * so freeing sizes frees them. state NULL: every piece is there
	 * already (prefetch.c's archives). */
	unsigned char *state;
	const char *src;
	char stamp[64];   /* src's "SIZE INODE MTIME" when the first cut */
	bool stale;       /* src changed since: every fetch fails, -EIO */
	void *bg;         /* a cut of pieces ahead still running (xfer_pieces.c) */
	void *fetch;      /* a fetch still running (mbfs_xfer_fetch_start) */
};

/* Start a download of path in pieces: makes the directory, sizes the file
 * and cuts its first pieces (one exec). 0 with *p (release it), or
 * -errno. */
int mbfs_xfer_split(struct mbfs *fs, const char *path, struct mbfs_pieces *p,
		    struct mb_err *err);
/* Fetch the count pieces listed in idx (ascending; NULL: 0..count-1) into
 * fd at index * MBFS_CHUNK, in parallel, cutting those not cut yet, and
 * ahead more after the last (not fetched: a sequential reader wants them
 * next; that cut may go on after the return: a later fetch waits for it
 * when it needs its pieces or a cut of its own, the release always). Each piece must have the size the first cut gave, and each cut
 * must find src as the first did: else -EIO (a file changed while read,
 * and p stays stale). 0 or -errno. */
int mbfs_xfer_fetch(struct mbfs *fs, struct mbfs_pieces *p, const size_t *idx,
		    size_t count, size_t ahead, int fd, struct mb_err *err);
/* The same, for a sequential reader: returns once the first want pieces
 * of idx are in fd, while the others go on in the background (as p's
 * running fetch, which then waits to grow rather than end); a failure of
 * one of those first is returned (the fetch ended). Every other call on
 * p (a fetch, the release) ends a running fetch first. 0 or -errno. */
int mbfs_xfer_fetch_start(struct mbfs *fs, struct mbfs_pieces *p,
			  const size_t *idx, size_t count, size_t ahead,
			  size_t want, int fd, struct mb_err *err);
/* Wait for piece i from p's running fetch: 1 once it is in fd, 0 when
 * that fetch will not bring it (none, not one of its pieces, failed or
 * stopped). */
int mbfs_xfer_fetch_wait(struct mbfs_pieces *p, size_t i);

/* Tell p's running fetch, if any, to stop, without waiting for it: a
 * reader whose deadline passed (bound.c) returns now; the next
 * mbfs_xfer_fetch_end joins the thread, which ends by its own bounds
 * (op_timeout per call). */
void mbfs_xfer_fetch_stop(struct mbfs_pieces *p);
/* Have p's running fetch GET the pieces after its last up to upto (those
 * after a piece in fd already excepted) and cut up to ahead more: a
 * sequential reader's read-ahead moves on with it, the GETs never
 * pausing at the end of a window. Nothing when none runs or it ended. */
void mbfs_xfer_fetch_grow(struct mbfs_pieces *p, size_t upto, size_t ahead);
/* Stop p's running fetch (the GETs in flight end first) and forget it;
 * have (may be NULL): the pieces it brought are set, *got counting those
 * not set before. 0 or its error (fs NULL: not passed through
 * mbfs_fail). */
int mbfs_xfer_fetch_end(struct mbfs *fs, struct mbfs_pieces *p,
			unsigned char *have, size_t *got, struct mb_err *err);
/* Remove the guest directory (best effort) and free. */
void mbfs_xfer_pieces_release(struct mbfs *fs, struct mbfs_pieces *p);
/* Free without removing the directory (at exit: the journal's note has
 * the next mount remove it). */
void mbfs_xfer_pieces_forget(struct mbfs_pieces *p);

/* Replace path on the guest with the first len bytes of fd. 0 or -errno
 * (already passed through mbfs_fail), with err->msg saying what failed;
 * sha (may be NULL: a file in parts then saves a pass over its bytes)
 * receives the SHA-256 of what was sent. mode (may be
 * NULL; *mode 0: none): permission bits for the file (one created here)
 * instead of the target's; an upload in parts gives them in its last
 * exec and sets *mode to 0, one PUT cannot (*mode stays: the caller
 * chmods). */
int mbfs_xfer_upload(struct mbfs *fs, const char *path, int fd, uint64_t len,
		     unsigned *mode, char sha[65], struct mb_err *err);
/* The same for the guest path rpath (recover.c: it may lie outside the
 * mounted directory). */
int mbfs_xfer_put(struct mbfs *fs, const char *rpath, int fd, uint64_t len,
		  unsigned *mode, char sha[65], struct mb_err *err);

/* The SHA-256 of the first len bytes of fd, in hex. 0 or -errno. */
int mbfs_xfer_hash_fd(int fd, uint64_t len, char hex[65]);

/* Remove what failed uploads left staged on the guest (one exec), now that
 * the service answers. Cheap when there is nothing. */
void mbfs_xfer_sweep(struct mbfs *fs);

/* Names that start so are staging of uploads: never shown by the mount
 * (one of the reserved MBFS_PRIVATE_PREFIX names, name.h). */
#define MBFS_STAGING_PREFIX ".mbfs-up"

/* 1 when the file name name (not a path) is upload staging. */
int mbfs_xfer_is_staging(const char *name);

#endif
