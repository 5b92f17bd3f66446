/* ll_dir.c: open directories of the FUSE session (ll.h): the handle
 * ops.c gave, and its listing, read whole at offset 0 and served in
 * pieces, as libfuse's high-level API did. A directory opened after its
 * name went (an fd or a shell's cwd in a directory removed here) lists
 * empty, as on a local disk.
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "fuse/face/ll_int.h"

/* what readdir says of an entry's inode number when it has none (libfuse's
 * high-level API said the same) */
#define UNKNOWN_INO 0xffffffffu

/* An open directory: the handle ops.c gave, and its listing, read whole
 * at offset 0 and served in pieces. gone: opened after its name went. */
struct dent {
	char *name;
	struct stat st;   /* st_ino and the type bits */
};

struct dirh {
	pthread_mutex_t lock;
	uint64_t fh;
	bool gone, filled;
	int error;
	struct dent *ents;
	size_t n, cap;
};

static void free_ents(struct dirh *dh)
{
	for (size_t i = 0; i < dh->n; i++)
		free(dh->ents[i].name);
	dh->n = 0;
}

static int collect(void *buf, const char *name, const struct stat *st,
		   off_t off, enum fuse_fill_dir_flags flags)
{
	(void)off; (void)flags;
	struct dirh *dh = buf;
	if (dh->n == dh->cap) {
		size_t cap = dh->cap ? dh->cap * 2 : 64;
		struct dent *e = realloc(dh->ents, cap * sizeof(*e));
		if (!e) {
			dh->error = -ENOMEM;
			return 1;
		}
		dh->ents = e;
		dh->cap = cap;
	}
	struct dent *d = &dh->ents[dh->n];
	memset(&d->st, 0, sizeof(d->st));
	d->st.st_ino = UNKNOWN_INO;
	if (st) {
		d->st.st_ino = st->st_ino;
		d->st.st_mode = st->st_mode;
	}
	d->name = strdup(name);
	if (!d->name) {
		dh->error = -ENOMEM;
		return 1;
	}
	dh->n++;
	return 0;
}

void mbfs_ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *llfi)
{
	mbfs_ll_begin(req);
	struct dirh *dh = calloc(1, sizeof(*dh));
	if (!dh)
		return mbfs_ll_reply_err(req, -ENOMEM);
	pthread_mutex_init(&dh->lock, NULL);
	char path[MB_PATH_MAX];
	struct stat st;
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_node_path(&l, ino, path, &st);
	if (rc == 1) {
		dh->gone = true;
		rc = 0;
	} else if (!rc) {
		struct fuse_file_info fi;
		memset(&fi, 0, sizeof(fi));
		fi.flags = llfi->flags;
		rc = L.op->opendir(path, &fi);
		dh->fh = fi.fh;
	}
	mbfs_itab_unlock(T, &l);
	if (rc) {
		pthread_mutex_destroy(&dh->lock);
		free(dh);
		return mbfs_ll_reply_err(req, rc);
	}
	llfi->fh = (uintptr_t)dh;
	if (fuse_reply_open(req, llfi) == -ENOENT) {
		if (!dh->gone) {
			struct fuse_file_info fi = { .fh = dh->fh };
			L.op->releasedir(NULL, &fi);
		}
		pthread_mutex_destroy(&dh->lock);
		free(dh);
	}
}

/* Fill dh with the listing of ino: where the directory is now (renamed
 * since its opendir, it lists under its new name), or nothing but its
 * dots once it is gone. */
static int fill(struct dirh *dh, fuse_ino_t ino)
{
	char path[MB_PATH_MAX];
	struct stat st;
	struct mbfs_itab_locks l = { 0 };
	int rc = dh->gone ? 1 : mbfs_ll_node_path(&l, ino, path, &st);
	if (rc == 1) {
		collect(dh, ".", NULL, 0, 0);
		collect(dh, "..", NULL, 0, 0);
		rc = 0;
	} else if (!rc) {
		struct fuse_file_info fi = { .fh = dh->fh };
		rc = L.op->readdir(path, dh, collect, 0, &fi, 0);
	}
	mbfs_itab_unlock(T, &l);
	return rc;
}

void mbfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *llfi)
{
	mbfs_ll_begin(req);
	struct dirh *dh = (struct dirh *)(uintptr_t)llfi->fh;
	pthread_mutex_lock(&dh->lock);
	if (off == 0)   /* a rewinddir reads it again */
		dh->filled = false;
	if (!dh->filled) {
		free_ents(dh);
		dh->error = 0;
		int rc = fill(dh, ino);
		if (!rc)
			rc = dh->error;
		if (rc) {
			free_ents(dh);
			pthread_mutex_unlock(&dh->lock);
			return mbfs_ll_reply_err(req, rc);
		}
		dh->filled = true;
	}
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		pthread_mutex_unlock(&dh->lock);
		return mbfs_ll_reply_err(req, -ENOMEM);
	}
	size_t used = 0;
	for (size_t i = off > 0 ? (size_t)off : 0; i < dh->n; i++) {
		size_t len = fuse_add_direntry(req, buf + used, size - used,
					       dh->ents[i].name, &dh->ents[i].st,
					       (off_t)(i + 1));
		if (len > size - used)
			break;
		used += len;
	}
	pthread_mutex_unlock(&dh->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void mbfs_ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *llfi)
{
	(void)ino;
	mbfs_ll_begin(req);
	struct dirh *dh = (struct dirh *)(uintptr_t)llfi->fh;
	if (!dh->gone) {
		struct fuse_file_info fi = { .fh = dh->fh };
		L.op->releasedir(NULL, &fi);
	}
	free_ents(dh);
	free(dh->ents);
	pthread_mutex_destroy(&dh->lock);
	free(dh);
	mbfs_ll_reply_err(req, 0);
}

void mbfs_ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *llfi)
{
	(void)ino;
	mbfs_ll_begin(req);
	struct dirh *dh = (struct dirh *)(uintptr_t)llfi->fh;
	struct fuse_file_info fi = { .fh = dh->fh };
	mbfs_ll_reply_err(req, dh->gone ? 0 : L.op->fsyncdir(NULL, datasync, &fi));
}
