/* xfer_pieces.c: a large download's pieces (xfer.h): cut on the guest
 * (fuse/guest/split.sh) in rounds while the pieces cut before are fetched
 * with parallel GETs, each round removing the pieces fetched since the
 * last. Does not decide which pieces a read needs (load.c), does not
 * keep a reader's fetch going in the background (xfer_ahead.c) and does
 * not fetch small files whole (xfer.c). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_fetch.h"
#include "fuse/transport/xfer_int.h"

/* A cut is an exec, tens of ms besides the copy, and takes one of the
 * sandbox's 4 operation slots from the GETs: the first round (with the
 * file's size) cuts a few pieces so that the GETs start early, later rounds
 * up to PER_CUT at a time (in the background, ahead of a sequential
 * reader), so that the GETs seldom wait for a cut and the execs are few.
 * The guest's /tmp holds the pieces cut ahead and those fetched since the
 * last cut: about 2 * PER_CUT at most, never a whole second copy of a
 * large file. */
#define FIRST_CUT 8u
#define PER_CUT 64u
#define DONE_MAX 64u    /* fetched pieces one cut removes, at most */
#define MAX_PIECES 100000u  /* split.sh's five-digit names */

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

void mbfs_fetch_skip_cut(struct fetch *f)
{
	while (f->cutpos < f->ext && !needs_cut(f->p, f->list[f->cutpos]))
		f->cutpos++;
}

/* "SIZE INODE MTIME" of the source, then the sizes of the pieces
 * [first, first + n): checked against what the first round said. */
static int check_cut(const struct mbfs_pieces *p, const char *out,
		     size_t first, size_t n, bool *stale, struct mb_err *err)
{
	size_t len = out ? strcspn(out, "\n") : 0;
	if (!out || len == 0 || len >= sizeof(p->stamp))
		return mb_err_set(err, EIO, "no report from cutting '%s'",
				  p->src);
	if (strncmp(out, p->stamp, len) || p->stamp[len]) {
		*stale = true;
		return mb_err_set(err, EIO, "'%s' changed on the sandbox while "
				  "it was read (%s, now %.*s)", p->src,
				  p->stamp, (int)len, out);
	}
	uint64_t *v;
	size_t k;
	int nr = mbfs_xfer_numbers(out + len, n, &v, &k);
	if (nr == -ENOMEM)
		return mb_err_set(err, ENOMEM, "out of memory");
	if (nr)
		return mb_err_set(err, EIO, "cutting '%s': the piece sizes are "
				  "not one number a line, at most %zu", p->src, n);
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
	rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, res, err);
	/* a later round only cuts and removes again what it did before: when
	 * the request failed, once more */
	if (rc && first && !mb_err_is_stopped(err)) {
		mb_err_clear(err);
		rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, res, err);
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

/* Before a cut of [first, first + n): the pieces fetched go with it
 * (named in done), the ones to cut are being cut. */
static size_t cut_prepare(struct mbfs_pieces *p, size_t first, size_t n,
			  char (*done)[24])
{
	size_t ndone = 0;
	for (size_t i = 0; i < p->n && ndone < DONE_MAX; i++)
		if (p->state[i] == MBFS_PIECE_FETCHED) {
			snprintf(done[ndone++], sizeof(done[0]), "p.%05zu", i);
			p->state[i] = MBFS_PIECE_GONE;
		}
	for (size_t i = first; i < first + n; i++)
		p->state[i] = MBFS_PIECE_CUTTING;
	return ndone;
}

/* The exec of a cut and its report (*stale: src changed). p is left
 * alone: a cut in the background runs beside fetches. */
static int cut_run(struct mbfs *fs, const struct mbfs_pieces *p, size_t first,
		   size_t n, char (*done)[24], size_t ndone, bool *stale,
		   struct mb_err *err)
{
	struct mb_exec_result res;
	int rc = run_cut(fs, p->src, p->dir, first, n, done, ndone, &res, err);
	if (rc == 0) {
		rc = check_cut(p, res.out, first, n, stale, err);
		mb_exec_result_release(&res);
	}
	return rc;
}

static void cut_finish(struct mbfs_pieces *p, size_t first, size_t n, int rc)
{
	for (size_t i = first; i < first + n; i++)
		p->state[i] = rc ? MBFS_PIECE_UNCUT : MBFS_PIECE_CUT;
}

/* Cut [first, first + n) of f's pieces, removing the fetched ones. Called
 * with f->lock held; drops it while the exec runs. */
static int cut(struct fetch *f, size_t first, size_t n, struct mb_err *err)
{
	struct mbfs_pieces *p = f->p;
	char done[DONE_MAX][24];
	size_t ndone = cut_prepare(p, first, n, done);
	f->cutting = true;
	pthread_mutex_unlock(&f->lock);
	bool stale = false;
	int rc = cut_run(f->fs, p, first, n, done, ndone, &stale, err);
	pthread_mutex_lock(&f->lock);
	cut_finish(p, first, n, rc);
	p->stale = p->stale || stale;
	f->cutting = false;
	mbfs_fetch_skip_cut(f);
	return rc;
}

/* A cut of pieces past those a fetch GETs runs in the background: its
 * fetch returns without waiting (its reader need not), the next fetch GETs
 * the pieces cut before it meanwhile and waits for it only when it comes
 * to its pieces; the release waits for it. One cut at a time. */
struct bgcut {
	pthread_t t;
	struct mbfs *fs;
	struct mbfs_pieces *p;
	size_t first, n, ndone;
	char done[DONE_MAX][24];
	int rc;
	bool stale;
	struct mb_err err;
	uint64_t deadline;   /* that of the fetch's thread (bound.c) */
};

static void *bg_main(void *arg)
{
	struct bgcut *c = arg;
	mb_op_deadline(c->deadline);
	c->rc = cut_run(c->fs, c->p, c->first, c->n, c->done, c->ndone,
			&c->stale, &c->err);
	return NULL;
}

/* Start [first, first + n) in the background. f->lock held. 0, or -1 when
 * it cannot (the caller cuts it itself). */
static int bg_start(struct fetch *f, size_t first, size_t n)
{
	struct bgcut *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	c->fs = f->fs;
	c->p = f->p;
	c->first = first;
	c->n = n;
	c->ndone = cut_prepare(f->p, first, n, c->done);
	c->deadline = mb_op_current();
	mb_err_clear(&c->err);
	if (pthread_create(&c->t, NULL, bg_main, c)) {
		/* the pieces named to go stay until the directory goes */
		cut_finish(f->p, first, n, -1);
		free(c);
		return -1;
	}
	f->p->bg = c;
	return 0;
}

/* The result of p's cut in the background, whose thread has ended: a
 * failed one leaves its pieces to cut again (or p stale). 0 or its -errno,
 * with its error in *err when err is not NULL. */
static int bg_take(struct mbfs_pieces *p, struct mb_err *err)
{
	struct bgcut *c = p->bg;
	cut_finish(p, c->first, c->n, c->rc);
	p->stale = p->stale || c->stale;
	int rc = c->rc;
	if (rc && err)
		*err = c->err;
	free(c);
	p->bg = NULL;
	return rc;
}

/* Wait for p's cut in the background, if any, and take its result. */
static int bg_join(struct mbfs_pieces *p, struct mb_err *err)
{
	if (!p->bg)
		return 0;
	pthread_join(((struct bgcut *)p->bg)->t, NULL);
	return bg_take(p, err);
}

/* The next GET waits for the cut in the background: join it. Called with
 * f->lock held; drops it meanwhile. */
static int join_bg(struct fetch *f, struct mb_err *err)
{
	struct bgcut *c = f->p->bg;
	f->joining = true;
	pthread_mutex_unlock(&f->lock);
	pthread_join(c->t, NULL);
	pthread_mutex_lock(&f->lock);
	int rc = bg_take(f->p, err);
	f->joining = false;
	/* its pieces may have to be cut again */
	f->cutpos = f->next;
	mbfs_fetch_skip_cut(f);
	return rc;
}

/* The next run of pieces to cut, when one is due: a few when no cut
 * piece waits, else many; contiguous, none cut already. */
static bool pick_cut(struct fetch *f, size_t *first, size_t *n)
{
	if (f->cutting || f->p->bg || f->cutpos >= f->ext)
		return false;
	size_t ready = f->cutpos < f->count ? f->cutpos - f->next
					    : MBFS_FETCH_CUT_AHEAD;
	if (f->cutpos < f->count && ready >= MBFS_FETCH_CUT_AHEAD)
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
int mbfs_fetch_worker(void *ud, size_t t)
{
	struct fetch *f = ud;
	struct mb_err err;
	size_t first, n;
	(void)t;
	pthread_mutex_lock(&f->lock);
	while (!f->rc && !f->stop) {
		mb_err_clear(&err);
		if (pick_cut(f, &first, &n)) {
			if (f->cutpos >= f->count && bg_start(f, first, n) == 0)
				continue;
			int rc = cut(f, first, n, &err);
			if (rc)
				fetch_error(f, rc, &err);
			pthread_cond_broadcast(&f->cv);
			continue;
		}
		size_t i = f->next < f->count ? f->list[f->next] : 0;
		bool cutting = f->p->state && f->next < f->count &&
			       f->p->state[i] == MBFS_PIECE_CUTTING;
		if (f->next < f->count && f->next < f->cutpos && !cutting) {
			f->next++;
			pthread_mutex_unlock(&f->lock);
			int rc = get_piece(f, i, &err);
			pthread_mutex_lock(&f->lock);
			if (rc)
				fetch_error(f, rc, &err);
			else if (f->p->state)
				f->p->state[i] = MBFS_PIECE_FETCHED;
			if (f->async)   /* a reader may wait for it */
				pthread_cond_broadcast(&f->cv);
			continue;
		}
		/* an async fetch may grow while its reader reads: its workers
		 * wait for that, unless it has the file's last piece */
		if (f->next >= f->count &&
		    (!f->async || f->list[f->count - 1] + 1 >= f->p->n))
			break;
		/* the next GET, or the cut it needs, waits for the cut in
		 * the background (cutting its piece, or cutting elsewhere:
		 * one cut at a time) */
		if (f->p->bg && !f->joining) {
			/* a failed one leaves its pieces to cut again, unless
			 * the file changed */
			int rc = join_bg(f, &err);
			if (rc && f->p->stale)
				fetch_error(f, rc, &err);
			else if (rc)
				mb_log(MB_LOG_DEBUG, "cutting ahead failed: %s",
				       err.msg);
			pthread_cond_broadcast(&f->cv);
			continue;
		}
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
	size_t len = 0;
	uint64_t total = 0;
	struct mb_err herr;
	if (mbfs_report_cut_head(res.out, &len, &total, &herr) ||
	    len >= sizeof(p->stamp))
		len = 0;
	size_t n = (size_t)(total / MBFS_CHUNK + (total % MBFS_CHUNK != 0));
	size_t srclen = strlen(rpath) + 1;
	void *block = NULL;
	if (len == 0)
		rc = mb_err_set(err, EIO, "no report from cutting '%s'", rpath);
	else if (n > MAX_PIECES)
		rc = mb_err_set(err, EFBIG, "'%s' has more than %u pieces of "
				"1 MiB", rpath, MAX_PIECES);
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
	rc = check_cut(p, res.out, 0, cut, &p->stale, err);
	mb_exec_result_release(&res);
	if (rc) {
		mbfs_xfer_pieces_release(fs, p);
		return mbfs_fail(fs, rc, err);
	}
	return 0;
}

/* A fetch of the count pieces of idx (NULL: 0..count-1) into fd, and
 * up to ahead more to cut; NULL with err set when it cannot be. */
struct fetch *mbfs_fetch_new(struct mbfs *fs, struct mbfs_pieces *p,
			      const size_t *idx, size_t count, size_t ahead,
			      int fd, struct mb_err *err)
{
	size_t last = idx ? idx[count - 1] : count - 1;
	if (!p->state || ahead > p->n - 1 - last)
		ahead = p->state ? p->n - 1 - last : 0;
	struct fetch *f = calloc(1, sizeof(*f));
	if (f)
		f->list = malloc((count + ahead) * sizeof(*f->list));
	if (!f || !f->list) {
		free(f);
		mb_err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	f->fs = fs;
	f->p = p;
	f->fd = fd;
	f->count = count;
	f->ext = f->cap = count + ahead;
	for (size_t k = 0; k < f->ext; k++) {
		f->list[k] = k < count ? (idx ? idx[k] : k) : last + 1 + k - count;
		/* wanted again (a fetch that failed): not for removal */
		if (k < count && p->state &&
		    p->state[f->list[k]] == MBFS_PIECE_FETCHED)
			p->state[f->list[k]] = MBFS_PIECE_CUT;
	}
	mbfs_fetch_skip_cut(f);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
	return f;
}

/* Free f, whose workers have ended: 0 or its error (in *err). */
int mbfs_fetch_free(struct fetch *f, struct mb_err *err)
{
	int rc = f->rc;
	if (rc && err)
		*err = f->err;
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->lock);
	free(f->list);
	free(f);
	return rc;
}

/* A fetch going on (xfer_ahead.c) is stopped and ended here too: a new
 * fetch or a release waits for it. */
void mbfs_xfer_fetch_stop(struct mbfs_pieces *p)
{
	struct fetch *f = p->fetch;
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
}

int mbfs_xfer_fetch_end(struct mbfs *fs, struct mbfs_pieces *p,
			unsigned char *have, size_t *got, struct mb_err *err)
{
	struct fetch *f = p->fetch;
	if (!f)
		return 0;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->t, NULL);
	p->fetch = NULL;
	/* what it brought, beside what its reader waited for */
	for (size_t k = 0; have && k < f->count; k++)
		if (!have[f->list[k]] && mbfs_fetch_in_fd(p, f->list[k])) {
			have[f->list[k]] = 1;
			(*got)++;
		}
	int rc = mbfs_fetch_free(f, err);
	return rc && fs ? mbfs_fail(fs, rc, err) : rc;
}

bool mbfs_fetch_stale(struct mbfs *fs, struct mbfs_pieces *p,
		      struct mb_err *err)
{
	if (p->stale)
		mbfs_fail(fs, mb_err_set(err, EIO, "'%s' changed on the sandbox "
					 "while it was read", p->src), err);
	return p->stale;
}

struct fetch *mbfs_fetch_begin(struct mbfs *fs, struct mbfs_pieces *p,
			       const size_t *idx, size_t count, size_t ahead,
			       int fd, struct mb_err *err, int *rc)
{
	mb_err_clear(err);
	mbfs_xfer_fetch_end(NULL, p, NULL, NULL, NULL);   /* one at a time */
	*rc = 0;
	if (mbfs_fetch_stale(fs, p, err))
		*rc = -EIO;
	if (*rc || !count)
		return NULL;
	struct fetch *f = mbfs_fetch_new(fs, p, idx, count, ahead, fd, err);
	if (!f)
		*rc = mbfs_fail(fs, -ENOMEM, err);
	return f;
}

int mbfs_xfer_fetch(struct mbfs *fs, struct mbfs_pieces *p, const size_t *idx,
		    size_t count, size_t ahead, int fd, struct mb_err *err)
{
	int rc;
	struct fetch *f = mbfs_fetch_begin(fs, p, idx, count, ahead, fd, err,
					   &rc);
	if (!f)
		return rc;
	mbfs_xfer_parallel(MBFS_XFER_THREADS, mbfs_fetch_worker, f);
	return mbfs_fail(fs, mbfs_fetch_free(f, err), err);
}

void mbfs_xfer_pieces_forget(struct mbfs_pieces *p)
{
	mbfs_xfer_fetch_end(NULL, p, NULL, NULL, NULL);
	bg_join(p, NULL);
	free(p->sizes);
	memset(p, 0, sizeof(*p));
}

void mbfs_xfer_pieces_release(struct mbfs *fs, struct mbfs_pieces *p)
{
	mbfs_xfer_fetch_end(fs, p, NULL, NULL, NULL);
	bg_join(p, NULL);
	if (p->sizes)
		mbfs_xfer_remove_noted(fs, p->dir, p->note);
	free(p->sizes);
	memset(p, 0, sizeof(*p));
}
