/* xfer_get.c: the download of a whole file (xfer.h): one GET for a small
 * one, the pieces of xfer_pieces.c for a large one. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"

static int get_small(struct mbfs *fs, const char *rpath, int fd,
		     uint64_t *size_out, struct mb_err *err)
{
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CHUNK);
	int rc = mb_file_get(fs->client, &fs->ident, rpath, &b, err);
	if (rc == 0) {
		rc = mbfs_pwrite_all(fd, b.data, b.len, 0);
		if (rc)
			mb_err_set(err, -rc, "cannot write the local cache: %s",
				   strerror(-rc));
		else
			*size_out = b.len;
	}
	mb_buf_release(&b);
	return rc;
}

int mbfs_xfer_download(struct mbfs *fs, const char *path, uint64_t size_hint,
		       int fd, uint64_t *size_out, struct mb_err *err)
{
	char rpath[MB_PATH_MAX];
	mb_err_clear(err);
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return mb_err_set(err, -rc, "path too long");
	if (size_hint <= MBFS_CHUNK) {
		rc = get_small(fs, rpath, fd, size_out, err);
		/* grew past 1 MiB since we looked: fall through to pieces */
		if (rc != -EFBIG && rc != -E2BIG && strcmp(err->code, "file_too_large"))
			return mbfs_fail(fs, rc, err);
		mb_err_clear(err);
	}
	if (ftruncate(fd, 0))
		return mb_err_set(err, errno, "cannot truncate the local cache");
	struct mbfs_pieces p;
	rc = mbfs_xfer_split(fs, path, &p, err);
	if (rc)
		return rc;
	rc = mbfs_xfer_fetch(fs, &p, NULL, p.n, 0, fd, err);
	if (!rc)
		*size_out = p.total;
	mbfs_xfer_pieces_release(fs, &p);
	return rc;
}
