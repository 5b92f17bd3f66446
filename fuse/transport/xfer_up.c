/* xfer_up.c: uploads of whole files (see xfer.h): one PUT, or parts staged
 * in the guest's /tmp and joined over the target, in rounds while later
 * parts are still being PUT; transient failures are reconciled and
 * retried while the upload makes progress. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"

#define CLEANUP_MS 10000u   /* removing staging after a failure, at most */
/* A round (an exec placing PUT parts in the joined file) costs an exec and
 * one of the four operations the PUTs share: only for this many parts
 * ready, and at most ROUND_MAX at once (their checksums travel in the
 * command). */
#define ROUND_MIN 16u
#define ROUND_MAX 64u

/* One upload. Its deadline moves on with every step that succeeds: it
 * gives up once nothing has gone through for op_timeout, however large the
 * file, and a stalled one ends after one op_timeout, not one per part. */
struct up {
	struct mbfs *fs;
	const char *rpath;
	int fd;
	uint64_t len;
	unsigned mode;             /* for the last join; 0: the target's */
	_Atomic uint64_t deadline;
	_Atomic uint64_t sent;     /* bytes of parts PUT, in fs->up_sent too */
	char dir[MB_PATH_MAX];     /* parts: /tmp/.mbfs-up-HEX, fresh */
	char tmp[MB_PATH_MAX];     /* the joined file, next to the target */
	size_t nparts;
	char (*psha)[65];          /* SHA-256 of each part PUT */
	pthread_mutex_t lock;
	/* protected by lock: */
	struct mb_err err;         /* the first part failure */
	bool err_set;
	unsigned char *put;        /* parts PUT */
	size_t ready;              /* parts below this are all PUT */
	size_t placed;             /* parts below this are in tmp */
	bool placing;              /* a round is running */
	bool no_rounds;            /* a round failed: the last call places */
};

int mbfs_xfer_is_staging(const char *name)
{
	return strncmp(name, MBFS_STAGING_PREFIX,
		       sizeof(MBFS_STAGING_PREFIX) - 1) == 0;
}

static void progress(struct up *u)
{
	atomic_store(&u->deadline, mb_now_ms() + u->fs->op_ms);
}

/* Every call of this thread ends by the upload's deadline. */
static void bound(struct up *u)
{
	mb_op_deadline(atomic_load(&u->deadline));
}

/* After a failed step: wait and return true when repeating it can help
 * (a transient failure, time left), else false. */
static bool again(struct up *u, const struct mb_err *e, unsigned *tries)
{
	if (!mb_err_is_transient(e))
		return false;
	uint64_t d = mb_backoff_ms((*tries)++, 250, 2000);
	if (mb_now_ms() + d >= atomic_load(&u->deadline))
		return false;
	mb_log(MB_LOG_DEBUG, "%s: trying again in %" PRIu64 " ms", e->msg, d);
	mb_sleep_ms(d);
	return true;
}

/* ---- up to 1 MiB: one PUT ---- */

/* Does the guest file hold exactly data? (A PUT is atomic: after an
 * unconfirmed one the file is all old or all new, contract §7.1.) */
static bool holds(struct up *u, const char *data, size_t len)
{
	struct mb_buf b;
	struct mb_err e;
	mb_buf_init(&b, MBFS_CHUNK);
	mb_err_clear(&e);
	bool same = mb_file_get(u->fs->client, &u->fs->ident, u->rpath, &b,
				&e) == 0 &&
		    b.len == len && memcmp(b.data ? b.data : "", data, len) == 0;
	mb_buf_release(&b);
	return same;
}

static int put_small(struct up *u, char sha[65], struct mb_err *err)
{
	size_t len = (size_t)u->len;
	char *data = malloc(len ? len : 1);
	if (!data)
		return mb_err_set(err, ENOMEM, "out of memory");
	int rc = mbfs_pread_all(u->fd, data, len, 0);
	if (rc) {
		free(data);
		return mb_err_set(err, -rc, "cannot read the local copy: %s",
				  strerror(-rc));
	}
	mb_sha256_hex(data, len, sha);
	for (unsigned tries = 0;;) {
		bound(u);
		rc = mb_file_put(u->fs->client, &u->fs->ident, u->rpath, data,
				 len, err);
		if (rc == 0)
			break;
		if (err->ambiguous && !mb_err_is_stopped(err) &&
		    holds(u, data, len)) {
			mb_log(MB_LOG_INFO, "upload of '%s' was unconfirmed but "
			       "the guest has the new content", u->rpath);
			rc = 0;
			break;
		}
		if (!again(u, err, &tries))
			break;
		mb_err_clear(err);
	}
	free(data);
	return rc;
}

/* ---- larger: parts, joined in rounds, the last one over the target ---- */

static void part_error(struct up *u, const struct mb_err *e)
{
	pthread_mutex_lock(&u->lock);
	if (!u->err_set) {
		u->err = *e;
		u->err_set = true;
	}
	pthread_mutex_unlock(&u->lock);
}

/* The call of fuse/guest/join.sh placing parts [from, to) in u->tmp;
 * last: then renaming it over the target. */
static int join_script(struct mb_buf *b, const struct up *u, size_t from,
		       size_t to, bool last)
{
	char part[24], first[24], size[24], mode[24] = "-";
	char root[MB_PATH_MAX];
	const char *argv[8 + ROUND_MAX];
	snprintf(part, sizeof(part), "%u", MBFS_CHUNK);
	snprintf(first, sizeof(first), "%zu", from);
	snprintf(size, sizeof(size), "%" PRIu64, u->len);
	if (u->mode)
		snprintf(mode, sizeof(mode), "%o", u->mode & 07777);
	/* no symlink below the mounted directory on the way to the target;
	 * a target outside it (recover.c) has only its own directory */
	size_t rl = strlen(u->fs->root);
	if (strncmp(u->rpath, u->fs->root, rl) == 0 && u->rpath[rl] == '/')
		snprintf(root, sizeof(root), "%s", u->fs->root);
	else
		snprintf(root, sizeof(root), "%.*s",
			 (int)(strrchr(u->rpath, '/') - u->rpath), u->rpath);
	argv[0] = root;
	argv[1] = u->dir;
	argv[2] = u->tmp;
	argv[3] = part;
	argv[4] = first;
	argv[5] = last ? u->rpath : "-";
	argv[6] = last ? size : "-";
	argv[7] = mode;
	for (size_t i = from; i < to; i++)
		argv[8 + i - from] = u->psha[i];
	return mbfs_sh_cmd(b, mbfs_sh_join, argv, 8 + to - from);
}

/* Run the join of parts [from, to) once. Exit status 3: a part is
 * missing or changed (-EIO). */
static int join_once(struct up *u, size_t from, size_t to, bool last,
		     struct mb_err *err)
{
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = join_script(&b, u, from, to, last);
	if (rc) {
		mb_buf_release(&b);
		return mb_err_set(err, ENAMETOOLONG, "command too long");
	}
	struct mb_exec_result res;
	bound(u);
	rc = mbfs_exec(u->fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, err);
	mb_buf_release(&b);
	if (rc)
		return rc;
	if (res.has_exit_code && res.exit_code == MBFS_NS_REFUSED) {
		rc = mb_err_set(err, ELOOP, "refused to save '%s': a directory "
				"on its path is a symlink on the sandbox, which "
				"leads out of the mounted directory", u->rpath);
	} else if (!mbfs_exec_ok(&res)) {
		rc = res.has_exit_code && res.exit_code == 3 ? -EIO
			: mbfs_stderr_errno(res.errout);
		mb_err_set(err, -rc, "cannot assemble '%s' on the guest: %.200s",
			   u->rpath, res.errout ? res.errout : "");
	}
	mb_exec_result_release(&res);
	if (rc == 0)
		progress(u);
	return rc;
}

/* A round: when enough parts are PUT in a row, this thread places them
 * while the others go on PUTting, so that the last join has only a short
 * tail left. Never the tail itself, which the last join places anyway. A
 * failed round is not repeated: the last join places what it left. */
static void maybe_round(struct up *u)
{
	size_t from = 0, to = 0;
	pthread_mutex_lock(&u->lock);
	if (!u->placing && !u->no_rounds && u->ready < u->nparts &&
	    u->ready - u->placed >= ROUND_MIN) {
		from = u->placed;
		to = u->ready - from > ROUND_MAX ? from + ROUND_MAX : u->ready;
		u->placing = true;
	}
	pthread_mutex_unlock(&u->lock);
	if (to == from)
		return;
	struct mb_err e;
	mb_err_clear(&e);
	int rc = join_once(u, from, to, false, &e);
	if (rc)
		mb_log(MB_LOG_DEBUG, "upload of '%s': a round failed (%s); the "
		       "last step places its parts", u->rpath, e.msg);
	pthread_mutex_lock(&u->lock);
	u->placing = false;
	if (rc)
		u->no_rounds = true;
	else
		u->placed = to;
	pthread_mutex_unlock(&u->lock);
}

static void part_done(struct up *u, size_t i)
{
	pthread_mutex_lock(&u->lock);
	u->put[i] = 1;
	while (u->ready < u->nparts && u->put[u->ready])
		u->ready++;
	pthread_mutex_unlock(&u->lock);
	maybe_round(u);
}

static int put_part(void *ud, size_t i)
{
	struct up *u = ud;
	uint64_t off = (uint64_t)i * MBFS_CHUNK;
	size_t n = u->len - off < MBFS_CHUNK ? (size_t)(u->len - off) : MBFS_CHUNK;
	char p[MB_PATH_MAX + 16];
	struct mb_err err;
	mb_err_clear(&err);
	snprintf(p, sizeof(p), "%s/p.%05zu", u->dir, i);
	char *buf = malloc(n ? n : 1);
	int rc = buf ? mbfs_pread_all(u->fd, buf, n, off) : -ENOMEM;
	if (rc)
		mb_err_set(&err, -rc, "cannot read the local copy: %s",
			   strerror(-rc));
	if (!rc)
		mb_sha256_hex(buf, n, u->psha[i]);   /* checked by join.sh */
	/* a part lives in our private staging directory: repeating its PUT
	 * after an unconfirmed one is harmless */
	for (unsigned tries = 0; !rc;) {
		bound(u);
		rc = mb_file_put(u->fs->client, &u->fs->ident, p, buf, n, &err);
		if (rc == 0) {
			progress(u);
			/* for the control file; a part PUT again after a
			 * failed round counts twice, near enough */
			atomic_fetch_add(&u->sent, n);
			atomic_fetch_add(&u->fs->up_sent, n);
			break;
		}
		if (!again(u, &err, &tries))
			break;
		mb_err_clear(&err);
		rc = 0;
	}
	free(buf);
	if (rc)
		part_error(u, &err);
	else
		part_done(u, i);
	return rc;
}

int mbfs_xfer_hash_fd(int fd, uint64_t len, char hex[65])
{
	struct mb_sha256 s;
	mb_sha256_init(&s);
	char *buf = malloc(MBFS_CHUNK);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t off = 0; off < len && !rc;) {
		size_t n = len - off < MBFS_CHUNK ? (size_t)(len - off) : MBFS_CHUNK;
		rc = mbfs_pread_all(fd, buf, n, off);
		if (!rc)
			mb_sha256_update(&s, buf, n);
		off += n;
	}
	free(buf);
	if (!rc)
		mb_sha256_final_hex(&s, hex);
	return rc;
}

struct hasher {
	int fd;
	uint64_t len;
	char hex[65];
	int rc;
};

static void *hash_main(void *arg)
{
	struct hasher *h = arg;
	h->rc = mbfs_xfer_hash_fd(h->fd, h->len, h->hex);
	return NULL;
}

/* After an unconfirmed last join: does the target hold what we sent?
 * hex: our bytes' hash, or "" (not worked out: worked out now). */
static bool landed(struct up *u, char hex[65])
{
	char got[65];
	if (!hex[0] && mbfs_xfer_hash_fd(u->fd, u->len, hex))
		return false;
	return mbfs_remote_sha256(u->fs, u->rpath, got) == 0 &&
	       strcmp(got, hex) == 0;
}

/* Place what the rounds left, ROUND_MAX parts a call, the last call with
 * the rename. Placing is idempotent, so a transient failure is simply
 * repeated; the last call is not (it renames and removes the parts):
 * after an unconfirmed one, the target is hashed first. */
static int join_rest(struct up *u, char hex[65], struct mb_err *err)
{
	bool unsure = false;
	unsigned tries = 0;
	for (;;) {
		size_t from = u->placed, to = u->nparts;
		bool last = to - from <= ROUND_MAX;
		if (!last)
			to = from + ROUND_MAX;
		int rc = join_once(u, from, to, last, err);
		if (rc == 0 && !last) {
			u->placed = to;
			tries = 0;
			continue;
		}
		if (rc == 0)
			return 0;
		/* after an unconfirmed last call: did the rename happen? (a
		 * repeat of one that did finds the parts gone) */
		if (last && (err->ambiguous || unsure) &&
		    !mb_err_is_stopped(err) && landed(u, hex)) {
			if (mbfs_xfer_remove_dir(u->fs, u->dir) == 0)
				return 0;
			return mb_err_set(err, EIO, "cannot remove the staging "
					  "of '%s'", u->rpath);
		}
		if (last && err->ambiguous)
			unsure = true;
		if (!again(u, err, &tries))
			return rc;
		mb_err_clear(err);
	}
}

/* After a failure: remove the staging, briefly (the service may be down:
 * then it is a leftover, removed when the service answers again). */
static void cleanup(struct up *u, unsigned note)
{
	struct mb_err e;
	mb_op_deadline(mb_now_ms() + (u->fs->op_ms < CLEANUP_MS ? u->fs->op_ms
				     : CLEANUP_MS));
	mb_err_clear(&e);
	int rc = mbfs_xfer_remove_dir(u->fs, u->dir);
	int trc = mb_fs_remove(u->fs->client, &u->fs->ident, u->tmp, false, &e);
	if (rc == 0 && (trc == 0 || trc == -ENOENT))
		mbfs_journal_unstage(u->fs->journal, note);
	else
		mbfs_journal_leftover(u->fs->journal, note);
}

/* PUT every part, in parallel, with rounds of joining among them. */
static int put_parts(struct up *u, struct mb_err *err)
{
	u->nparts = (size_t)((u->len + MBFS_CHUNK - 1) / MBFS_CHUNK);
	u->psha = calloc(u->nparts, sizeof(*u->psha));
	u->put = calloc(u->nparts, 1);
	if (!u->psha || !u->put)
		return mb_err_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&u->lock, NULL);
	int rc = mbfs_xfer_parallel(u->nparts, put_part, u);
	if (rc && u->err_set)
		*err = u->err;
	pthread_mutex_destroy(&u->lock);
	return rc;
}

/* sha: the whole file's hash when want (worked out while the parts go),
 * else "" (or what a check of an unconfirmed last join worked out). */
static int put_large(struct up *u, bool want, char sha[65], struct mb_err *err)
{
	char hex[17];
	struct mbfs *fs = u->fs;
	if (mb_random_hex(hex, 8))
		return mb_err_set(err, EIO, "no random bytes");
	const char *slash = strrchr(u->rpath, '/');
	int dl = slash ? (int)(slash - u->rpath) : 0;
	snprintf(u->dir, sizeof(u->dir), "/tmp/" MBFS_STAGING_PREFIX "-%s", hex);
	if (snprintf(u->tmp, sizeof(u->tmp), "%.*s/" MBFS_STAGING_PREFIX "-%s",
		     dl, u->rpath, hex) >= (int)sizeof(u->tmp))
		return mb_err_set(err, ENAMETOOLONG, "path too long");
	/* the whole file's hash, when the caller records it, while the parts
	 * go: a pass over the file, as long as the parts' own */
	struct hasher h = { .fd = u->fd, .len = u->len };
	pthread_t ht;
	bool threaded = want && pthread_create(&ht, NULL, hash_main, &h) == 0;
	if (want && !threaded)
		hash_main(&h);
	/* noted before it exists: a crash from here on leaves a note that
	 * the next mount acts on */
	const char *staged[] = { u->dir, u->tmp };
	unsigned note;
	int rc = mbfs_journal_stage(fs->journal, staged, 2, &note);
	if (rc) {
		if (threaded)
			pthread_join(ht, NULL);
		return mb_err_set(err, -rc, "cannot write the journal: %s",
				  strerror(-rc));
	}
	for (unsigned tries = 0;;) {
		bound(u);
		/* a fresh name of ours, made here: the mkdir fails on one
		 * taken (even by a symlink); a repeat after an unconfirmed
		 * one finds it made */
		rc = mb_fs_mkdir(fs->client, &fs->ident, u->dir, false, 0700, err);
		if (rc == -EEXIST && tries > 0)
			rc = 0;
		if (rc == 0 || !again(u, err, &tries))
			break;
		mb_err_clear(err);
	}
	if (rc == 0) {
		progress(u);
		rc = put_parts(u, err);
	}
	if (threaded)
		pthread_join(ht, NULL);
	if (rc == 0 && h.rc)
		rc = mb_err_set(err, -h.rc, "cannot read the local copy: %s",
				strerror(-h.rc));
	if (rc == 0) {
		memcpy(sha, want ? h.hex : "", want ? sizeof(h.hex) : 1);
		rc = join_rest(u, sha, err);
	}
	free(u->psha);
	free(u->put);
	if (rc == 0)
		mbfs_journal_unstage(fs->journal, note);
	else if (!mb_err_is_stopped(err))
		cleanup(u, note);
	else
		mbfs_journal_unstage(fs->journal, note);   /* the sandbox is gone */
	return rc;
}

int mbfs_xfer_put(struct mbfs *fs, const char *rpath, int fd, uint64_t len,
		  unsigned *mode, char sha[65], struct mb_err *err)
{
	struct up u = { .fs = fs, .rpath = rpath, .fd = fd, .len = len,
			.mode = mode && len > MBFS_CHUNK ? *mode : 0 };
	char hex[65];
	mb_err_clear(err);
	progress(&u);
	uint64_t outer = mb_op_deadline(0);
	int rc = len <= MBFS_CHUNK ? put_small(&u, hex, err)
				   : put_large(&u, sha != NULL, hex, err);
	mb_op_deadline(outer);
	atomic_fetch_sub(&fs->up_sent, atomic_load(&u.sent));
	if (rc == 0 && sha)
		memcpy(sha, hex, sizeof(hex));
	if (rc == 0 && u.mode)
		*mode = 0;   /* the last join gave it */
	if (rc == 0)
		mbfs_xfer_sweep(fs);   /* the service answers again */
	return mbfs_fail(fs, rc, err);
}

int mbfs_xfer_upload(struct mbfs *fs, const char *path, int fd, uint64_t len,
		     unsigned *mode, char sha[65], struct mb_err *err)
{
	char rpath[MB_PATH_MAX];
	mb_err_clear(err);
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return mb_err_set(err, -rc, "path too long");
	return mbfs_xfer_put(fs, rpath, fd, len, mode, sha, err);
}

void mbfs_xfer_sweep(struct mbfs *fs)
{
	char **paths;
	unsigned *ids;
	size_t n, nids;
	if (!fs->journal || atomic_load(&fs->stopped) ||
	    mbfs_journal_leftovers(fs->journal, &paths, &n, &ids, &nids) ||
	    nids == 0)
		return;
	struct mb_buf b;
	mb_buf_init(&b, MB_MAX_FILE_BYTES);
	int rc = mbfs_sh_cmd(&b, mbfs_sh_unstage, (const char *const *)paths, n);
	if (!rc)
		rc = mbfs_exec_simple(fs, b.data, MBFS_EXEC_TIMEOUT_MS);
	mb_buf_release(&b);
	for (size_t i = 0; i < nids; i++) {
		if (rc)
			mbfs_journal_leftover(fs->journal, ids[i]);
		else
			mbfs_journal_unstage(fs->journal, ids[i]);
	}
	if (!rc)
		mb_log(MB_LOG_INFO, "removed the staging of %zu failed upload%s "
		       "from the guest", nids, nids == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(ids);
}
