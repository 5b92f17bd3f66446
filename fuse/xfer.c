/* xfer.c: downloads of whole files and the split pieces of large ones
 * (xfer.h), and the worker pool both directions use (xfer_int.h); uploads
 * are in xfer_up.c. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/guest_sh.h"
#include "fuse/journal.h"
#include "fuse/mbfs.h"
#include "fuse/remote.h"
#include "fuse/xfer.h"
#include "fuse/xfer_int.h"

#define EXEC_TIMEOUT_MS 50000L

/* ---- a small pool running fn(ud, i) for i in [0, n) ---- */

struct par {
	int (*fn)(void *ud, size_t i);
	void *ud;
	size_t n;
	atomic_size_t next;
	atomic_int rc;
};

static void *par_worker(void *arg)
{
	struct par *p = arg;
	while (!atomic_load(&p->rc)) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n)
			break;
		int rc = p->fn(p->ud, i);
		int zero = 0;
		if (rc)
			atomic_compare_exchange_strong(&p->rc, &zero, rc);
	}
	return NULL;
}

int mbfs_xfer_parallel(size_t n, int (*fn)(void *, size_t), void *ud)
{
	struct par p = { .fn = fn, .ud = ud, .n = n };
	atomic_init(&p.next, 0);
	atomic_init(&p.rc, 0);
	pthread_t t[MBFS_XFER_THREADS];
	size_t started = 0;
	for (size_t k = 1; k < MBFS_XFER_THREADS && k < n; k++)
		if (pthread_create(&t[started], NULL, par_worker, &p) == 0)
			started++;
	par_worker(&p);
	for (size_t k = 0; k < started; k++)
		pthread_join(t[k], NULL);
	return atomic_load(&p.rc);
}

/* State shared by the parts of one transfer; the first error is kept. */
struct job {
	struct mbfs *fs;
	char dir[MB_PATH_MAX];      /* guest directory of the parts */
	int fd;
	uint64_t len;
	uint64_t *sizes;            /* download: expected piece sizes */
	const size_t *idx;          /* download: pieces to fetch (NULL: all) */
	pthread_mutex_t lock;
	struct mb_err err;          /* protected by lock */
	bool err_set;
};

static void job_error(struct job *j, const struct mb_err *e)
{
	pthread_mutex_lock(&j->lock);
	if (!j->err_set) {
		j->err = *e;
		j->err_set = true;
	}
	pthread_mutex_unlock(&j->lock);
}

int mbfs_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;
	while (n) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int mbfs_pread_all(int fd, void *p, size_t n, uint64_t off)
{
	char *c = p;
	while (n) {
		ssize_t r = pread(fd, c, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		c += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int mbfs_xfer_remove_dir(struct mbfs *fs, const char *rdir)
{
	struct mb_err e;
	mb_err_clear(&e);
	int rc = mb_fs_remove(fs->client, &fs->ident, rdir, true, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		mb_log(MB_LOG_WARN, "cannot remove '%s' on the guest: %s", rdir, e.msg);
	return rc;
}

unsigned mbfs_xfer_note_dir(struct mbfs *fs, const char *rdir)
{
	unsigned id = 0;
	const char *paths[] = { rdir };
	if (!fs->journal || mbfs_journal_stage(fs->journal, paths, 1, &id))
		return 0;
	return id;
}

void mbfs_xfer_dir_gone(struct mbfs *fs, unsigned note)
{
	if (note && fs->journal)
		mbfs_journal_unstage(fs->journal, note);
}

void mbfs_xfer_remove_noted(struct mbfs *fs, const char *rdir, unsigned note)
{
	/* a sandbox that is gone (stopped) takes its /tmp along */
	bool gone = atomic_load(&fs->stopped) ||
		    mbfs_xfer_remove_dir(fs, rdir) == 0;
	if (!note || !fs->journal)
		return;
	if (gone)
		mbfs_journal_unstage(fs->journal, note);
	else
		mbfs_journal_leftover(fs->journal, note);
}

/* ---- downloads ---- */

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

static int dl_part(void *ud, size_t k)
{
	struct job *j = ud;
	size_t i = j->idx ? j->idx[k] : k;
	char p[MB_PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/p.%05zu", j->dir, i);
	struct mb_buf b;
	struct mb_err err;
	mb_buf_init(&b, MBFS_CHUNK);
	mb_err_clear(&err);
	int rc = mb_file_get(j->fs->client, &j->fs->ident, p, &b, &err);
	if (rc == 0 && b.len != j->sizes[i])
		rc = mb_err_set(&err, EIO, "piece %zu of a download has %zu "
				"bytes, expected %" PRIu64, i, b.len, j->sizes[i]);
	if (rc == 0 && (rc = mbfs_pwrite_all(j->fd, b.data, b.len,
					(uint64_t)i * MBFS_CHUNK)))
		mb_err_set(&err, -rc, "cannot write the local cache: %s",
			   strerror(-rc));
	mb_buf_release(&b);
	if (rc)
		job_error(j, &err);
	return rc;
}

/* Split rpath into pieces under j->dir (fuse/guest/split.sh); fills
 * j->sizes / count from the sizes it prints. */
static int split_remote(struct job *j, const char *rpath, size_t *count,
			struct mb_err *err)
{
	char size[24];
	snprintf(size, sizeof(size), "%u", MBFS_CHUNK);
	const char *argv[] = { rpath, j->dir, size };
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mbfs_sh_cmd(&b, mbfs_sh_split, argv, 3);
	if (rc) {
		mb_buf_release(&b);
		return mb_err_set(err, -rc, "command too long");
	}
	struct mb_exec_result res;
	rc = mbfs_exec(j->fs, b.data, EXEC_TIMEOUT_MS, &res, err);
	mb_buf_release(&b);
	if (rc)
		return rc;
	if (!mbfs_exec_ok(&res)) {
		rc = mbfs_stderr_errno(res.errout);
		mb_err_set(err, -rc, "cannot split '%s' on the guest: %.200s",
			   rpath, res.errout ? res.errout : "");
		mb_exec_result_release(&res);
		return rc;
	}
	size_t n = 0, cap = 16;
	uint64_t *v = malloc(cap * sizeof(*v));
	for (char *s = res.out; v && s && *s;) {
		char *end;
		unsigned long long x = strtoull(s, &end, 10);
		if (end == s)
			break;
		if (n == cap) {
			uint64_t *nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv) {
				free(v);
				v = NULL;
				break;
			}
			v = nv;
			cap *= 2;
		}
		v[n++] = x;
		s = end + strspn(end, "\n");
	}
	mb_exec_result_release(&res);
	if (!v)
		return mb_err_set(err, ENOMEM, "out of memory");
	j->sizes = v;
	*count = n;
	return 0;
}

int mbfs_xfer_split(struct mbfs *fs, const char *path, struct mbfs_pieces *p,
		    struct mb_err *err)
{
	char rpath[MB_PATH_MAX], hex[17];
	struct job j = { .fs = fs };
	mb_err_clear(err);
	memset(p, 0, sizeof(*p));
	if (mbfs_remote_path(fs, path, rpath))
		return mb_err_set(err, ENAMETOOLONG, "path too long");
	if (mb_random_hex(hex, 8))
		return mb_err_set(err, EIO, "no random bytes");
	snprintf(j.dir, sizeof(j.dir), "/tmp/.mbfs-dl-%s", hex);
	unsigned note = mbfs_xfer_note_dir(fs, j.dir);
	size_t n = 0;
	int rc = split_remote(&j, rpath, &n, err);
	if (rc) {
		/* split.sh leaves no directory when it fails */
		if (err->ambiguous && !mb_err_is_stopped(err))
			mbfs_xfer_remove_noted(fs, j.dir, note);
		else
			mbfs_xfer_dir_gone(fs, note);
		return mbfs_fail(fs, rc, err);
	}
	p->note = note;
	snprintf(p->dir, sizeof(p->dir), "%s", j.dir);
	p->sizes = j.sizes;
	p->n = n;
	for (size_t i = 0; i < n; i++)
		p->total += j.sizes[i];
	return 0;
}

int mbfs_xfer_fetch(struct mbfs *fs, const struct mbfs_pieces *p,
		    const size_t *idx, size_t count, int fd, struct mb_err *err)
{
	struct job j = { .fs = fs, .fd = fd, .sizes = p->sizes, .idx = idx };
	mb_err_clear(err);
	snprintf(j.dir, sizeof(j.dir), "%s", p->dir);
	pthread_mutex_init(&j.lock, NULL);
	int rc = mbfs_xfer_parallel(count, dl_part, &j);
	if (rc && j.err_set)
		*err = j.err;
	pthread_mutex_destroy(&j.lock);
	return mbfs_fail(fs, rc, err);
}

void mbfs_xfer_pieces_release(struct mbfs *fs, struct mbfs_pieces *p)
{
	if (p->sizes)
		mbfs_xfer_remove_noted(fs, p->dir, p->note);
	free(p->sizes);
	memset(p, 0, sizeof(*p));
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
	rc = mbfs_xfer_fetch(fs, &p, NULL, p.n, fd, err);
	if (!rc)
		*size_out = p.total;
	mbfs_xfer_pieces_release(fs, &p);
	return rc;
}
