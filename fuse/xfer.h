/* xfer.h: moving whole files between a local fd and the guest.
 *
 * Downloads (xfer.c): up to 1 MiB with one GET; larger files are split on
 * the guest into 1 MiB pieces in a private /tmp directory (one exec), the
 * pieces are fetched with parallel GETs and the directory removed.
 * Uploads (xfer_up.c): up to 1 MiB with one PUT (atomic on the guest);
 * larger files are PUT as parts into a staging directory in the guest's
 * /tmp (/tmp/.mbfs-up/HEX, never in the user's tree); while later parts
 * are PUT, rounds (one exec each) check the parts PUT so far against the
 * SHA-256 of each computed here and write them into a hidden file next to
 * the target (.mbfs-up-HEX, for the upload's time); the last exec does
 * the same for the tail, checks the size, keeps the target's mode and
 * renames it over the target with `mv -fT`: no program on the guest ever
 * sees a half-written file. Every transient failure (a 5xx, a
 * reset, a timeout) is reconciled (the target read back or hashed, never
 * a blind repeat) and retried until the upload has made no progress for
 * op_timeout. The staging of an upload, and a download's pieces, are
 * noted in the journal before they exist and removed after; what a
 * failure or a crash left is removed when the service answers again
 * (mbfs_xfer_sweep) or at the next mount.
 * Paths are mount-relative unless named rpath. Thread-safe; the client's
 * limiter bounds the requests in flight.
 */
#ifndef MBFS_XFER_H
#define MBFS_XFER_H

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

/* A file split on the guest into MBFS_CHUNK pieces (the last may be
 * shorter) in a private directory, for fetching piece by piece. */
struct mbfs_pieces {
	char dir[4096];
	uint64_t *sizes;
	size_t n;
	uint64_t total;
	unsigned note;    /* the journal's note of dir (0: none) */
};

/* Split path (one exec). 0 with *p (release it), or -errno. */
int mbfs_xfer_split(struct mbfs *fs, const char *path, struct mbfs_pieces *p,
		    struct mb_err *err);
/* Fetch the count pieces listed in idx (NULL: 0..count-1) into fd at
 * index * MBFS_CHUNK, in parallel. 0 or -errno. */
int mbfs_xfer_fetch(struct mbfs *fs, const struct mbfs_pieces *p,
		    const size_t *idx, size_t count, int fd, struct mb_err *err);
/* Remove the guest directory (best effort) and free. */
void mbfs_xfer_pieces_release(struct mbfs *fs, struct mbfs_pieces *p);

/* Replace path on the guest with the first len bytes of fd. 0 or -errno
 * (already passed through mbfs_fail), with err->msg saying what failed;
 * sha (may be NULL) receives the SHA-256 of what was sent. */
int mbfs_xfer_upload(struct mbfs *fs, const char *path, int fd, uint64_t len,
		     char sha[65], struct mb_err *err);
/* The same for the guest path rpath (recover.c: it may lie outside the
 * mounted directory). */
int mbfs_xfer_put(struct mbfs *fs, const char *rpath, int fd, uint64_t len,
		  char sha[65], struct mb_err *err);

/* Remove what failed uploads left staged on the guest (one exec), now that
 * the service answers. Cheap when there is nothing. */
void mbfs_xfer_sweep(struct mbfs *fs);

/* Names that start so are staging of uploads: never shown by the mount. */
#define MBFS_STAGING_PREFIX ".mbfs-up"

/* 1 when the file name name (not a path) is upload staging. */
int mbfs_xfer_is_staging(const char *name);

#endif
