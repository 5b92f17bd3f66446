/* prefetch.c: bulk reads of small files (prefetch.h): when a directory's
 * files are worth one archive, and fetching and unpacking it into the data
 * cache. Reads the archive with tarread.c; does not open or load files
 * (load.c asks here on a miss and then takes the copy). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/data.h"
#include "fuse/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/node.h"
#include "fuse/pack.h"
#include "fuse/prefetch.h"
#include "fuse/remote.h"
#include "fuse/tarread.h"
#include "fuse/xfer.h"
#include "fuse/xfer_int.h"

#define EXEC_TIMEOUT_MS 50000L
#define MAX_RECS 64
#define MAX_COLD 16
/* room the excluded subtrees may take in the command (of its 16 KiB) */
#define EXCL_BYTES 6144u

/* An archive of dir's subtree, in flight or done within the window. */
struct rec {
	char *dir;
	uint64_t id;
	uint64_t at_ms;         /* when it ended */
	bool done;
	bool complete;          /* every small file under dir but those of
	                           the excluded subtrees (archived whole
	                           before) is in it */
};

/* A directory with one cold read and no archive yet. */
struct cold {
	char *dir;
	uint64_t at_ms;
};

struct mbfs_prefetch {
	pthread_mutex_t lock;
	pthread_cond_t done;            /* an archive ended */
	struct rec recs[MAX_RECS];      /* protected by lock */
	struct cold cold[MAX_COLD];     /* protected by lock */
	uint64_t next_id;               /* protected by lock */
	char *leftover;                 /* protected by lock: the pieces'
	                                   directory of an archive done, removed
	                                   by the next pack.sh (one request
	                                   less) or at unmount */
	unsigned leftover_note;         /* its journal note (xfer_int.h) */
};

struct mbfs_prefetch *mbfs_prefetch_new(void)
{
	struct mbfs_prefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->done, NULL);
	return p;
}

void mbfs_prefetch_free(struct mbfs_prefetch *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < MAX_RECS; i++)
		free(p->recs[i].dir);
	for (size_t i = 0; i < MAX_COLD; i++)
		free(p->cold[i].dir);
	free(p->leftover);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* ---- when: the records of recent cold reads and archives ---- */

/* dir is path or one of its ancestors. */
static bool covers(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Forget what is older than the window (never an archive in flight).
 * Lock held. */
static void expire(struct mbfs_prefetch *p, uint64_t now)
{
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (r->dir && r->done &&
		    now - r->at_ms > MBFS_PREFETCH_WINDOW_MS) {
			free(r->dir);
			memset(r, 0, sizeof(*r));
		}
	}
	for (size_t i = 0; i < MAX_COLD; i++) {
		struct cold *c = &p->cold[i];
		if (c->dir && now - c->at_ms > MBFS_PREFETCH_WINDOW_MS) {
			free(c->dir);
			memset(c, 0, sizeof(*c));
		}
	}
}

static bool in_flight(struct mbfs_prefetch *p, uint64_t id)
{
	for (size_t i = 0; i < MAX_RECS; i++)
		if (p->recs[i].dir && p->recs[i].id == id)
			return !p->recs[i].done;
	return false;
}

/* A record whose directory's parent is parent, other than self. */
static bool sibling_archived(struct mbfs_prefetch *p, const char *parent,
			     const char *self)
{
	char up[MB_PATH_MAX + 2];
	for (size_t i = 0; i < MAX_RECS; i++) {
		const char *d = p->recs[i].dir;
		if (!d || strcmp(d, "/") == 0 || strcmp(d, self) == 0 ||
		    strlen(d) >= MB_PATH_MAX)
			continue;
		mbfs_parent_path(d, up);
		if (strcmp(up, parent) == 0)
			return true;
	}
	return false;
}

static struct rec *rec_of(struct mbfs_prefetch *p, const char *dir)
{
	for (size_t i = 0; i < MAX_RECS; i++)
		if (p->recs[i].dir && strcmp(p->recs[i].dir, dir) == 0)
			return &p->recs[i];
	return NULL;
}

/* Note a first cold read in dir; true when dir had one already. */
static bool cold_again(struct mbfs_prefetch *p, const char *dir, uint64_t now)
{
	struct cold *free_slot = NULL, *oldest = &p->cold[0];
	for (size_t i = 0; i < MAX_COLD; i++) {
		struct cold *c = &p->cold[i];
		if (c->dir && strcmp(c->dir, dir) == 0)
			return true;
		if (!c->dir && !free_slot)
			free_slot = c;
		if (c->at_ms < oldest->at_ms)
			oldest = c;
	}
	struct cold *c = free_slot ? free_slot : oldest;
	char *d = strdup(dir);
	if (d) {
		free(c->dir);
		c->dir = d;
		c->at_ms = now;
	}
	return false;
}

/* The directory to archive for a cold read in dir, into base; false when
 * none (read the file alone). Lock held. */
static bool choose(struct mbfs_prefetch *p, const char *dir, uint64_t now,
		   char *base)
{
	char par[MB_PATH_MAX + 2], gpar[MB_PATH_MAX + 2];
	mbfs_parent_path(dir, par);
	mbfs_parent_path(par, gpar);
	bool top = strcmp(dir, "/") == 0;
	if (!cold_again(p, dir, now))
		return false;
	if (!top && strcmp(par, "/") && sibling_archived(p, gpar, par))
		strcpy(base, gpar);
	else if (!top && sibling_archived(p, par, dir))
		strcpy(base, par);
	else
		strcpy(base, dir);
	/* archived already and cut by the caps (or failed): not again */
	if (rec_of(p, base)) {
		if (strcmp(base, dir) == 0 || rec_of(p, dir))
			return false;
		strcpy(base, dir);
	}
	return true;
}

/* A free record (the oldest done one when full), or NULL. Lock held. */
static struct rec *new_rec(struct mbfs_prefetch *p)
{
	struct rec *slot = NULL;
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (!r->dir)
			return r;
		if (r->done && (!slot || r->at_ms < slot->at_ms))
			slot = r;
	}
	if (slot) {
		free(slot->dir);
		memset(slot, 0, sizeof(*slot));
	}
	return slot;
}

/* ---- what: one archive ---- */

struct job {
	struct mbfs *fs;
	struct mbfs_prefetch *p;
	const char *base;           /* mount-relative directory archived */
	char *first;                /* the triggering directory, relative
	                               to base ("." for base) */
	char **excl;                /* subtrees left out, relative to base */
	size_t nexcl;
	struct mbfs_pieces pieces;  /* on the guest until released */
	time_t now;                 /* the guest's clock before the walk */
	uint64_t ls;                /* bytes of listings ending the pieces */
	uint64_t ctr;               /* the cache's write counter before */
	uint64_t stamp;             /* the data cache's (mbfs_data_stamp) */
	bool cut;
	size_t files, put;
	int fd;                     /* the archive, local */
	char *buf;
};

static int unpack_one(void *ud, const struct mbfs_tar_member *m)
{
	struct job *j = ud;
	char path[MB_PATH_MAX];
	if (m->type != '0' && m->type != '\0')
		return 0;
	if (m->size > MBFS_PREFETCH_FILE_MAX ||
	    !mbfs_pack_path(j->base, m->name, path)) {
		mb_log(MB_LOG_DEBUG, "bulk read: member '%.200s' left out",
		       m->name);
		return 0;
	}
	/* changed in the walk's second: it may change again in it, with
	 * the same size and mtime; a file open or queued here is ours */
	if (m->mtime >= j->now || mbfs_node_busy(j->fs, path))
		return 0;
	int rc = mbfs_pread_all(j->fd, j->buf, (size_t)m->size, m->off);
	char *local = NULL;
	int fd = -1;
	if (!rc)
		rc = mbfs_data_newfile(j->fs->data, &local, &fd);
	if (!rc)
		rc = mbfs_pwrite_all(fd, j->buf, (size_t)m->size, 0);
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (rc) {
		mbfs_data_discard(local);
		return rc;
	}
	/* not over what the mount wrote or sent since the walk began: the
	 * walk may have seen the version before, with the same size and
	 * whole-second mtime */
	mbfs_data_put_fetched(j->fs->data, path, m->size, m->mtime, local,
			      j->stamp);
	j->put++;
	return 0;
}

/* "NOW FILES CUT LISTBYTES" then the piece sizes, one a line. */
static int parse_report(struct job *j, const char *out)
{
	long long now;
	unsigned long files;
	unsigned long long ls;
	int cut, used;
	if (!out || sscanf(out, "%lld %lu %d %llu%n", &now, &files, &cut, &ls,
			   &used) != 4)
		return -EIO;
	j->now = (time_t)now;
	j->files = files;
	j->cut = cut != 0;
	j->ls = ls;
	uint64_t *v;
	size_t n;
	if (mbfs_xfer_numbers(out + used, &v, &n))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		j->pieces.total += v[i];
	if (!files) {           /* pack.sh left no directory */
		free(v);
		return n ? -EIO : 0;
	}
	j->pieces.sizes = v;
	j->pieces.n = n;
	if (!n || j->pieces.total > 2 * MBFS_PREFETCH_BYTES + MBFS_PREFETCH_LS_MAX ||
	    j->ls > j->pieces.total)
		return -EIO;
	return 0;
}

/* Hand the pieces' directory dir (taken) and its journal note to the
 * next pack.sh, or remove it now when one is waiting already. */
static void leave(struct mbfs_prefetch *p, struct mbfs *fs, char *dir,
		  unsigned note)
{
	if (!dir)
		return;
	pthread_mutex_lock(&p->lock);
	if (!p->leftover) {
		p->leftover = dir;
		p->leftover_note = note;
		dir = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (dir)
		mbfs_xfer_remove_noted(fs, dir, note);
	free(dir);
}

/* Run pack.sh for j (one exec); fills j->pieces. */
static int pack(struct job *j, struct mb_err *err)
{
	struct mbfs *fs = j->fs;
	char rpath[MB_PATH_MAX], hex[17], chunk[24], cap[24], files[24];
	if (mbfs_remote_path(fs, j->base, rpath))
		return mb_err_set(err, ENAMETOOLONG, "path too long");
	if (mb_random_hex(hex, 8))
		return mb_err_set(err, EIO, "no random bytes");
	snprintf(j->pieces.dir, sizeof(j->pieces.dir), "/tmp/.mbfs-dl-%s", hex);
	snprintf(chunk, sizeof(chunk), "%u", MBFS_CHUNK);
	snprintf(cap, sizeof(cap), "%u", MBFS_PREFETCH_BYTES);
	snprintf(files, sizeof(files), "%u", MBFS_PREFETCH_FILES);
	pthread_mutex_lock(&j->p->lock);
	char *prev = j->p->leftover;
	unsigned prev_note = j->p->leftover_note;
	j->p->leftover = NULL;
	pthread_mutex_unlock(&j->p->lock);
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mb_buf_append(&b, MBFS_SH_ARGS, strlen(MBFS_SH_ARGS));
	const char *args[] = { rpath, j->first, j->pieces.dir, chunk, cap, files,
			       prev ? prev : "-" };
	for (size_t i = 0; !rc && i < 7; i++)
		rc = mbfs_sh_arg(&b, args[i]);
	/* past the budget an excluded subtree is fetched again: a cost,
	 * not an error */
	size_t start = b.len;
	for (size_t i = 0; !rc && i < j->nexcl; i++)
		if (b.len - start + strlen(j->excl[i]) < EXCL_BYTES)
			rc = mbfs_sh_arg(&b, j->excl[i]);
	if (!rc)
		rc = mbfs_sh_body(&b, mbfs_sh_pack);
	/* the listings carry their entries' times: queued ones land first,
	 * as before a list request; a change of ours from now on keeps the
	 * listings out of the cache */
	mbfs_batch_flush(fs, j->base, MBFS_BATCH_SELF | MBFS_BATCH_BELOW);
	j->ctr = mbfs_cache_counter(fs->cache);
	j->stamp = mbfs_data_stamp(fs->data);
	struct mb_exec_result res;
	if (rc) {
		mb_err_set(err, -rc, "command too long");
	} else {
		j->pieces.note = mbfs_xfer_note_dir(fs, j->pieces.dir);
		rc = mbfs_exec(fs, b.data, EXEC_TIMEOUT_MS, &res, err);
	}
	mb_buf_release(&b);
	if (rc) {
		/* prev is still there, or may be */
		leave(j->p, fs, prev, prev_note);
		if (err->ambiguous && !mb_err_is_stopped(err))
			mbfs_xfer_remove_noted(fs, j->pieces.dir, j->pieces.note);
		else
			mbfs_xfer_dir_gone(fs, j->pieces.note);
		j->pieces.note = 0;
		return mbfs_fail(fs, rc, err);
	}
	free(prev);     /* pack.sh removes it first thing */
	mbfs_xfer_dir_gone(fs, prev_note);
	if (!mbfs_exec_ok(&res)) {
		rc = mb_err_set(err, EIO, "pack.sh failed: %.200s",
				res.errout ? res.errout : "");
	} else if ((rc = parse_report(j, res.out))) {
		mb_err_set(err, -rc, "pack.sh said: %.200s",
			   res.out ? res.out : "");
		/* the directory is ours whatever it said */
		if (!j->pieces.sizes)
			j->pieces.sizes = calloc(1, sizeof(uint64_t));
	}
	mb_exec_result_release(&res);
	return rc;
}

/* Fetch and unpack what pack() made; 0 or -errno. */
static int unpack(struct job *j, struct mb_err *err)
{
	struct mbfs *fs = j->fs;
	char *scratch = NULL;
	int rc = mbfs_data_newfile(fs->data, &scratch, &j->fd);
	if (rc)
		return mb_err_set(err, -rc, "cannot make a local file: %s",
				  strerror(-rc));
	rc = mbfs_xfer_fetch(fs, &j->pieces, NULL, j->pieces.n, 0, j->fd, err);
	if (!rc && !(j->buf = malloc(MBFS_PREFETCH_FILE_MAX)))
		rc = mb_err_set(err, ENOMEM, "out of memory");
	if (!rc) {
		rc = mbfs_tar_walk(j->fd, j->pieces.total - j->ls, unpack_one, j);
		if (rc)
			mb_err_set(err, -rc, "cannot unpack the archive: %s",
				   strerror(-rc));
	}
	char *text = !rc && j->ls ? malloc(j->ls) : NULL;
	if (text && !mbfs_pread_all(j->fd, text, j->ls, j->pieces.total - j->ls) &&
	    mbfs_pack_listings(fs, j->base, text, j->ls, j->ctr))
		mb_log(MB_LOG_WARN, "bulk read of '%s': its listings are "
		       "damaged, not kept", j->base);
	free(text);
	free(j->buf);
	close(j->fd);
	mbfs_data_discard(scratch);
	return rc;
}

/* Archive j->base; true when the archive is complete. Logs failures. */
static bool run(struct job *j)
{
	struct mb_err err;
	mb_err_clear(&err);
	uint64_t t0 = mb_now_ms();
	int rc = pack(j, &err);
	if (!rc && j->pieces.n)
		rc = unpack(j, &err);
	if (rc) {
		mb_log(MB_LOG_WARN, "bulk read of '%s' failed, files are read "
		       "one by one: %s", j->base,
		       err.msg[0] ? err.msg : strerror(-rc));
		return false;
	}
	mb_log(MB_LOG_DEBUG, "bulk read of '%s': %zu files (%zu kept), %"
	       PRIu64 " bytes in %zu pieces, %s, %" PRIu64 " ms", j->base,
	       j->files, j->put, j->pieces.total, j->pieces.n,
	       j->cut ? "cut by the caps" : "whole", mb_now_ms() - t0);
	return !j->cut;
}

/* ---- the entry point ---- */

static char *relative(const char *base, const char *dir)
{
	if (strcmp(base, dir) == 0)
		return strdup(".");
	return strdup(dir + (strcmp(base, "/") == 0 ? 1 : strlen(base) + 1));
}

/* j's excluded subtrees: those under base archived whole, or being
 * archived. Lock held. */
static void exclusions(struct mbfs_prefetch *p, struct job *j)
{
	j->excl = calloc(MAX_RECS, sizeof(*j->excl));
	for (size_t i = 0; j->excl && i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (!r->dir || (r->done && !r->complete) ||
		    strcmp(r->dir, j->base) == 0 || !covers(j->base, r->dir))
			continue;
		char *s = relative(j->base, r->dir);
		if (s)
			j->excl[j->nexcl++] = s;
	}
}

void mbfs_prefetch_stop(struct mbfs *fs)
{
	struct mbfs_prefetch *p = fs->prefetch;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	char *dir = p->leftover;
	unsigned note = p->leftover_note;
	p->leftover = NULL;
	pthread_mutex_unlock(&p->lock);
	if (dir)
		mbfs_xfer_remove_noted(fs, dir, note);
	free(dir);
}

int mbfs_prefetch_miss(struct mbfs *fs, const char *path, uint64_t size)
{
	struct mbfs_prefetch *p = fs->prefetch;
	char dir[MB_PATH_MAX + 2], base[MB_PATH_MAX + 2];
	if (!p || size > MBFS_PREFETCH_FILE_MAX || strlen(path) >= MB_PATH_MAX ||
	    mbfs_check_alive(fs))
		return 0;
	mbfs_parent_path(path, dir);
	pthread_mutex_lock(&p->lock);
	uint64_t now = mb_now_ms();
	expire(p, now);
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (r->dir && !r->done && covers(r->dir, dir)) {
			uint64_t id = r->id;
			while (in_flight(p, id))
				pthread_cond_wait(&p->done, &p->lock);
			pthread_mutex_unlock(&p->lock);
			return 1;
		}
	}
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (r->dir && r->complete && covers(r->dir, dir)) {
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
	}
	struct rec *r = NULL;
	struct job j = { .fs = fs, .p = p, .base = base, .fd = -1 };
	if (choose(p, dir, now, base) && (r = new_rec(p)) &&
	    (r->dir = strdup(base)) && (j.first = relative(base, dir))) {
		r->id = ++p->next_id;
		exclusions(p, &j);
	} else if (r) {
		free(r->dir);
		r->dir = NULL;
		r = NULL;
	}
	uint64_t id = r ? r->id : 0;
	pthread_mutex_unlock(&p->lock);
	if (!id)
		return 0;

	bool complete = run(&j);

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < MAX_RECS; i++) {
		if (p->recs[i].dir && p->recs[i].id == id) {
			p->recs[i].done = true;
			p->recs[i].complete = complete;
			p->recs[i].at_ms = mb_now_ms();
		}
	}
	pthread_cond_broadcast(&p->done);
	pthread_mutex_unlock(&p->lock);
	if (j.pieces.sizes)
		leave(p, fs, strdup(j.pieces.dir), j.pieces.note);
	else
		mbfs_xfer_dir_gone(fs, j.pieces.note);   /* pack.sh made none */
	free(j.pieces.sizes);
	for (size_t i = 0; i < j.nexcl; i++)
		free(j.excl[i]);
	free(j.excl);
	free(j.first);
	return 1;
}
