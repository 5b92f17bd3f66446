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

int mbfs_xfer_numbers(const char *s, uint64_t **v, size_t *n)
{
	size_t k = 0, cap = 16;
	uint64_t *a = malloc(cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	for (; s && *s;) {
		s += strspn(s, "\n");
		char *end;
		unsigned long long x = strtoull(s, &end, 10);
		if (end == s)
			break;
		if (k == cap) {
			uint64_t *na = realloc(a, 2 * cap * sizeof(*a));
			if (!na) {
				free(a);
				return -ENOMEM;
			}
			a = na;
			cap *= 2;
		}
		a[k++] = x;
		s = end;
	}
	*v = a;
	*n = k;
	return 0;
}

/* ---- the pieces of a large download, cut as they are fetched ---- */

/* A cut is an exec, tens of ms besides the copy: the first round cuts a
 * few pieces so that the GETs start early, later rounds many at a time,
 * soon enough that the GETs never catch up with the cutting. */
#define FIRST_CUT 4u
#define PER_CUT 32u
#define CUT_AHEAD 24u   /* cut again when fewer cut pieces than this wait */
#define DONE_MAX 64u    /* fetched pieces one cut removes, at most */

/* One fetch: positions [0, count) of the list are GET, [count, ext) only
 * cut (a sequential reader comes for them next). */
struct fetch {
	struct mbfs *fs;
	struct mbfs_pieces *p;
	int fd;
	size_t *list;           /* piece numbers, ascending */
	size_t count, ext;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	/* protected by lock (and p->state with it): */
	size_t next;            /* position of the next GET */
	size_t cutpos;          /* positions below are cut */
	bool cutting;
	struct mb_err err;
	int rc;                 /* the first error, -errno (0: none) */
};

static bool needs_cut(const struct mbfs_pieces *p, size_t i)
{
	return p->state && (p->state[i] == MBFS_PIECE_UNCUT ||
			    p->state[i] == MBFS_PIECE_GONE);
}

static void fetch_error(struct fetch *f, int rc, const struct mb_err *e)
{
	if (!f->rc) {
		f->rc = rc;
		f->err = *e;
	}
}

static void skip_cut(struct fetch *f)
{
	while (f->cutpos < f->ext && !needs_cut(f->p, f->list[f->cutpos]))
		f->cutpos++;
}

/* "SIZE INODE MTIME" of the source, then the sizes of the pieces
 * [first, first + n): checked against what the first round said. */
static int check_cut(struct mbfs_pieces *p, const char *out, size_t first,
		     size_t n, struct mb_err *err)
{
	size_t len = out ? strcspn(out, "\n") : 0;
	if (!out || len == 0 || len >= sizeof(p->stamp))
		return mb_err_set(err, EIO, "no report from cutting '%s'",
				  p->src);
	if (strncmp(out, p->stamp, len) || p->stamp[len]) {
		p->stale = true;
		return mb_err_set(err, EIO, "'%s' changed on the sandbox while "
				  "it was read (%s, now %.*s)", p->src,
				  p->stamp, (int)len, out);
	}
	uint64_t *v;
	size_t k;
	if (mbfs_xfer_numbers(out + len, &v, &k))
		return mb_err_set(err, ENOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		if (i >= k || v[i] != p->sizes[first + i])
			rc = mb_err_set(err, EIO, "piece %zu of '%s' was cut "
					"with %" PRIu64 " bytes, expected %"
					PRIu64, first + i, p->src,
					i < k ? v[i] : 0, p->sizes[first + i]);
	free(v);
	return rc;
}

/* Run split.sh: remove the pieces named in done, cut [first, first + n).
 * 0 with *res (release it), or -errno. */
static int run_cut(struct mbfs *fs, const char *src, const char *dir,
		   size_t first, size_t n, char (*done)[24], size_t ndone,
		   struct mb_exec_result *res, struct mb_err *err)
{
	char size[24], from[24], cnt[24];
	snprintf(size, sizeof(size), "%u", MBFS_CHUNK);
	snprintf(from, sizeof(from), "%zu", first);
	snprintf(cnt, sizeof(cnt), "%zu", n);
	const char *argv[5 + DONE_MAX] = { src, dir, size, from, cnt };
	for (size_t k = 0; k < ndone; k++)
		argv[5 + k] = done[k];
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mbfs_sh_cmd(&b, mbfs_sh_split, argv, 5 + ndone);
	if (rc) {
		mb_buf_release(&b);
		return mb_err_set(err, -rc, "command too long");
	}
	rc = mbfs_exec(fs, b.data, EXEC_TIMEOUT_MS, res, err);
	/* a later round only cuts and removes again what it did before: when
	 * the request failed, once more */
	if (rc && first && !mb_err_is_stopped(err)) {
		mb_err_clear(err);
		rc = mbfs_exec(fs, b.data, EXEC_TIMEOUT_MS, res, err);
	}
	mb_buf_release(&b);
	if (rc)
		return rc;
	if (!mbfs_exec_ok(res)) {
		rc = mbfs_stderr_errno(res->errout);
		mb_err_set(err, -rc, "cannot cut '%s' on the guest: %.200s",
			   src, res->errout ? res->errout : "");
		mb_exec_result_release(res);
	}
	return rc;
}

/* Cut [first, first + n) of f's pieces, removing the fetched ones. Called
 * with f->lock held; drops it while the exec runs. */
static int cut(struct fetch *f, size_t first, size_t n, struct mb_err *err)
{
	struct mbfs_pieces *p = f->p;
	char done[DONE_MAX][24];
	size_t ndone = 0;
	/* a piece fetched is still wanted when a later position of this
	 * fetch names it (fetched before by a fetch that failed) */
	for (size_t i = 0; i < p->n && ndone < DONE_MAX; i++)
		if (p->state[i] == MBFS_PIECE_FETCHED) {
			snprintf(done[ndone++], sizeof(done[0]), "p.%05zu", i);
			p->state[i] = MBFS_PIECE_GONE;
		}
	for (size_t i = first; i < first + n; i++)
		p->state[i] = MBFS_PIECE_CUTTING;
	f->cutting = true;
	pthread_mutex_unlock(&f->lock);
	struct mb_exec_result res;
	int rc = run_cut(f->fs, p->src, p->dir, first, n, done, ndone, &res,
			 err);
	pthread_mutex_lock(&f->lock);
	if (rc == 0) {
		rc = check_cut(p, res.out, first, n, err);
		mb_exec_result_release(&res);
	}
	for (size_t i = first; i < first + n; i++)
		p->state[i] = rc ? MBFS_PIECE_UNCUT : MBFS_PIECE_CUT;
	f->cutting = false;
	skip_cut(f);
	return rc;
}

/* The next run of pieces to cut, when one is due: a few when no cut
 * piece waits, else many; contiguous, none cut already. */
static bool pick_cut(struct fetch *f, size_t *first, size_t *n)
{
	if (f->cutting || f->cutpos >= f->ext)
		return false;
	size_t ready = f->cutpos < f->count ? f->cutpos - f->next : CUT_AHEAD;
	if (f->cutpos < f->count && ready >= CUT_AHEAD)
		return false;
	size_t a = f->list[f->cutpos], m = ready ? PER_CUT : FIRST_CUT, c = 1;
	while (c < m && f->cutpos + c < f->ext &&
	       f->list[f->cutpos + c] == a + c && needs_cut(f->p, a + c))
		c++;
	*first = a;
	*n = c;
	return true;
}

static int get_piece(struct fetch *f, size_t i, struct mb_err *err)
{
	char path[MB_PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/p.%05zu", f->p->dir, i);
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CHUNK);
	int rc = mb_file_get(f->fs->client, &f->fs->ident, path, &b, err);
	if (rc == 0 && b.len != f->p->sizes[i])
		rc = mb_err_set(err, EIO, "piece %zu of a download has %zu "
				"bytes, expected %" PRIu64, i, b.len,
				f->p->sizes[i]);
	if (rc == 0 && (rc = mbfs_pwrite_all(f->fd, b.data, b.len,
					(uint64_t)i * MBFS_CHUNK)))
		mb_err_set(err, -rc, "cannot write the local cache: %s",
			   strerror(-rc));
	mb_buf_release(&b);
	return rc;
}

/* A worker: cut when the cut pieces run low, else GET the next one cut,
 * until every piece is fetched or one failed. */
static int fetch_worker(void *ud, size_t t)
{
	struct fetch *f = ud;
	struct mb_err err;
	size_t first, n;
	(void)t;
	pthread_mutex_lock(&f->lock);
	while (!f->rc) {
		mb_err_clear(&err);
		if (pick_cut(f, &first, &n)) {
			int rc = cut(f, first, n, &err);
			if (rc)
				fetch_error(f, rc, &err);
			pthread_cond_broadcast(&f->cv);
			continue;
		}
		if (f->next < f->count && f->next < f->cutpos) {
			size_t i = f->list[f->next++];
			pthread_mutex_unlock(&f->lock);
			int rc = get_piece(f, i, &err);
			pthread_mutex_lock(&f->lock);
			if (rc)
				fetch_error(f, rc, &err);
			else if (f->p->state)
				f->p->state[i] = MBFS_PIECE_FETCHED;
			continue;
		}
		if (f->next >= f->count)
			break;
		pthread_cond_wait(&f->cv, &f->lock);
	}
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

int mbfs_xfer_split(struct mbfs *fs, const char *path, struct mbfs_pieces *p,
		    struct mb_err *err)
{
	char rpath[MB_PATH_MAX], dir[MB_PATH_MAX], hex[17];
	mb_err_clear(err);
	memset(p, 0, sizeof(*p));
	if (mbfs_remote_path(fs, path, rpath))
		return mb_err_set(err, ENAMETOOLONG, "path too long");
	if (mb_random_hex(hex, 8))
		return mb_err_set(err, EIO, "no random bytes");
	snprintf(dir, sizeof(dir), "/tmp/.mbfs-dl-%s", hex);
	unsigned note = mbfs_xfer_note_dir(fs, dir);
	struct mb_exec_result res;
	int rc = run_cut(fs, rpath, dir, 0, FIRST_CUT, NULL, 0, &res, err);
	if (rc) {
		/* split.sh leaves no directory when it fails */
		if (err->ambiguous && !mb_err_is_stopped(err))
			mbfs_xfer_remove_noted(fs, dir, note);
		else
			mbfs_xfer_dir_gone(fs, note);
		return mbfs_fail(fs, rc, err);
	}
	/* the first line sizes every piece; sizes, state and src share one
	 * block (xfer.h) */
	size_t len = res.out ? strcspn(res.out, "\n") : 0;
	uint64_t total = res.out ? strtoull(res.out, NULL, 10) : 0;
	size_t n = (size_t)((total + MBFS_CHUNK - 1) / MBFS_CHUNK);
	size_t srclen = strlen(rpath) + 1;
	void *block = NULL;
	if (len == 0 || len >= sizeof(p->stamp) || n > 100000)
		rc = mb_err_set(err, EIO, "no report from cutting '%s'", rpath);
	else if (!(block = malloc(n * (sizeof(uint64_t) + 1) + srclen)))
		rc = mb_err_set(err, ENOMEM, "out of memory");
	if (rc) {
		mb_exec_result_release(&res);
		mbfs_xfer_remove_noted(fs, dir, note);
		return mbfs_fail(fs, rc, err);
	}
	p->sizes = block;
	p->state = (unsigned char *)(p->sizes + n);
	p->src = memcpy(p->state + n, rpath, srclen);
	p->n = n;
	p->total = total;
	p->note = note;
	snprintf(p->dir, sizeof(p->dir), "%s", dir);
	snprintf(p->stamp, sizeof(p->stamp), "%.*s", (int)len, res.out);
	size_t cut = n < FIRST_CUT ? n : FIRST_CUT;
	for (size_t i = 0; i < n; i++) {
		p->sizes[i] = i + 1 < n ? MBFS_CHUNK
					: total - (uint64_t)i * MBFS_CHUNK;
		p->state[i] = i < cut ? MBFS_PIECE_CUT : MBFS_PIECE_UNCUT;
	}
	rc = check_cut(p, res.out, 0, cut, err);
	mb_exec_result_release(&res);
	if (rc) {
		mbfs_xfer_pieces_release(fs, p);
		return mbfs_fail(fs, rc, err);
	}
	return 0;
}

int mbfs_xfer_fetch(struct mbfs *fs, struct mbfs_pieces *p, const size_t *idx,
		    size_t count, size_t ahead, int fd, struct mb_err *err)
{
	mb_err_clear(err);
	if (p->stale)
		return mbfs_fail(fs, mb_err_set(err, EIO, "'%s' changed on "
					"the sandbox while it was read",
					p->src), err);
	if (!count)
		return 0;
	size_t last = idx ? idx[count - 1] : count - 1;
	if (!p->state || ahead > p->n - 1 - last)
		ahead = p->state ? p->n - 1 - last : 0;
	struct fetch f = { .fs = fs, .p = p, .fd = fd, .count = count,
			   .ext = count + ahead };
	f.list = malloc(f.ext * sizeof(*f.list));
	if (!f.list)
		return mbfs_fail(fs, mb_err_set(err, ENOMEM, "out of memory"),
				 err);
	for (size_t k = 0; k < f.ext; k++) {
		f.list[k] = k < count ? (idx ? idx[k] : k) : last + 1 + k - count;
		/* wanted again (a fetch that failed): not for removal */
		if (k < count && p->state &&
		    p->state[f.list[k]] == MBFS_PIECE_FETCHED)
			p->state[f.list[k]] = MBFS_PIECE_CUT;
	}
	skip_cut(&f);
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cv, NULL);
	mbfs_xfer_parallel(MBFS_XFER_THREADS, fetch_worker, &f);
	int rc = f.rc;
	if (rc)
		*err = f.err;
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.lock);
	free(f.list);
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
	rc = mbfs_xfer_fetch(fs, &p, NULL, p.n, 0, fd, err);
	if (!rc)
		*size_out = p.total;
	mbfs_xfer_pieces_release(fs, &p);
	return rc;
}
