/* wbsend.c: a write-back batch as a tar archive in 1 MiB PUTs plus one
 * exec of apply.sh (see wbsend.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/transport/route.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/report.h"
#include "fuse/transport/touch.h"
#include "fuse/outbox/wbsend.h"
#include "fuse/transport/xfer.h"

/* The mount's own directory for batch parts and reports: a fresh random
 * name, made private (0700) when first needed, by a mkdir that fails on a
 * name taken (a planted symlink too); noted in the journal from before it
 * exists until the unmount removes it, so a killed mount's goes at the
 * next mount (recover.c). */
#define STAGE_PREFIX "/tmp/.mbfs-wb-"
#define APPLY_STAGE_SWAPPED 5   /* apply.sh: the batch directory is not ours */
#define TAR_BLOCK 512u
#define NAME_MAX_TAR 99u
/* A batch of names only whose list, quoted for sh, is at most this goes
 * in the command (apply.sh's LIST), which the exec packs (gzip) when it
 * is too long for the request: a list of paths packs ten to one, so most
 * storms' batches are one request. What does not fit goes up as a file,
 * one PUT, as the archive would. With the script, within MBFS_CMD_MAX. */
#define INLINE_MAX (32u * 1024u)

/* The report of the last batch that ran, removed by the next one (a rerun
 * after a lost answer reads it). Only the flusher sends; the lock is for
 * mbfs_wbsend_finish at unmount. */
static pthread_mutex_t prev_lock = PTHREAD_MUTEX_INITIALIZER;
static char prev_done[MB_PATH_MAX];
static char stage_dir[64];      /* protected by prev_lock; "" until noted */
static unsigned stage_note;     /* protected by prev_lock */

/* The mount's batch directory into out, noted in the journal at the first
 * call. 0 or -errno. */
static int stage_name(struct mbfs *fs, char out[64])
{
	int rc = 0;
	pthread_mutex_lock(&prev_lock);
	if (!stage_dir[0]) {
		char hex[17], dir[64];
		unsigned note;
		rc = mb_random_hex(hex, 8) ? -EIO : 0;
		snprintf(dir, sizeof(dir), STAGE_PREFIX "%s", hex);
		const char *paths[] = { dir };
		if (!rc && fs->journal)
			rc = mbfs_journal_stage(fs->journal, paths, 1, &note);
		if (!rc) {
			memcpy(stage_dir, dir, sizeof(dir));
			stage_note = fs->journal ? note : 0;
		}
	}
	memcpy(out, stage_dir, sizeof(stage_dir));
	pthread_mutex_unlock(&prev_lock);
	return rc;
}

int mbfs_wbsend_ledger(struct mbfs *fs, char out[64])
{
	return stage_name(fs, out);
}

/* The batch directory was swapped for a symlink after the mount made it
 * (apply.sh removed what the PUTs left through it): forget it, so that
 * the next batch makes a fresh one; the link is not ours to remove. */
static void new_stage(struct mbfs *fs)
{
	pthread_mutex_lock(&prev_lock);
	mb_log(MB_LOG_WARN, "the sandbox replaced the mount's batch directory "
	       "'%s': the next batch uses a new one", stage_dir);
	if (stage_dir[0] && fs->journal)
		mbfs_journal_unstage(fs->journal, stage_note);
	stage_dir[0] = prev_done[0] = '\0';
	pthread_mutex_unlock(&prev_lock);
}

bool mbfs_wbsend_fits(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	return name[0] && strlen(name) <= NAME_MAX_TAR && !strchr(path, '\n');
}

/* ---- the archive ---- */

static void octal(char *field, size_t width, uint64_t v)
{
	/* width - 1 digits and a NUL, as GNU tar writes them */
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

/* A ustar header of type (a regular file '0', a pax record 'x') for
 * prefix/name of len bytes. */
static int tar_header(struct mb_buf *b, const char *prefix, const char *name,
		      size_t len, unsigned mode, time_t mtime, char type)
{
	unsigned char h[TAR_BLOCK];
	memset(h, 0, sizeof(h));
	if (strlen(name) > 100 || strlen(prefix) > 155)
		return -ENAMETOOLONG;
	memcpy(h, name, strlen(name));
	octal((char *)h + 100, 8, mode & 07777);
	octal((char *)h + 108, 8, 0);
	octal((char *)h + 116, 8, 0);
	octal((char *)h + 124, 12, len);
	octal((char *)h + 136, 12, mtime > 0 ? (uint64_t)mtime : 0);
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 345, prefix, strlen(prefix));
	unsigned sum = 0;
	for (size_t i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return mb_buf_append(b, h, sizeof(h));
}

static int pad(struct mb_buf *b, size_t len)
{
	static const char zero[TAR_BLOCK];
	return len % TAR_BLOCK ? mb_buf_append(b, zero, TAR_BLOCK - len % TAR_BLOCK)
			       : 0;
}

/* A pax record giving the next member its mtime to the nanosecond (GNU
 * tar sets it so at extraction): a whole-second time could be older than
 * what a build made from the file, which then would not be rebuilt. */
static int pax_mtime(struct mb_buf *b, const struct timespec *t)
{
	char rec[64], body[48];
	int bl = snprintf(body, sizeof(body), " mtime=%lld.%09ld\n",
			  (long long)(t->tv_sec > 0 ? t->tv_sec : 0),
			  t->tv_sec > 0 ? t->tv_nsec : 0L);
	/* the record's length counts its own digits */
	int len = bl + 1;
	while (snprintf(NULL, 0, "%d", len) + bl != len)
		len++;
	snprintf(rec, sizeof(rec), "%d%s", len, body);
	int rc = tar_header(b, "", "PaxHeader", (size_t)len, 0644, 0, 'x');
	if (!rc)
		rc = mb_buf_append(b, rec, (size_t)len);
	return rc ? rc : pad(b, (size_t)len);
}

static int tar_member(struct mb_buf *b, const char *prefix, const char *name,
		      const char *data, size_t len, unsigned mode,
		      const struct timespec *mtime)
{
	int rc = mtime ? pax_mtime(b, mtime) : 0;
	if (!rc)
		rc = tar_header(b, prefix, name, len, mode,
				mtime ? mtime->tv_sec : time(NULL), '0');
	if (!rc && len)
		rc = mb_buf_append(b, data, len);
	return rc ? rc : pad(b, len);
}

/* Files sorted by directory (then by arrival): one group per directory. */

static size_t dir_len(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? (size_t)(slash - path) : 0;
}

static int by_dir(const void *a, const void *b, void *base)
{
	const struct mbfs_wbfile *v = base;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const char *p = v[i].path, *q = v[j].path;
	size_t pl = dir_len(p), ql = dir_len(q);
	int c = memcmp(p, q, pl < ql ? pl : ql);
	if (!c && pl != ql)
		c = pl < ql ? -1 : 1;
	if (!c)
		c = i < j ? -1 : i > j;
	return c;
}

/* The archive of v in order into b (list: an "r" or "R" line for each
 * removal, an "i", a "v" and a "V" line for each move, a "p" line for each
 * file's chmod, an "m" line for each directory to make ("M" when in
 * doubt), groups of files, then a group with a "t" or "c" line for each
 * directory time or mode of dv); or, for a batch of names only whose
 * list is at most INLINE_MAX, the list alone into inl (b untouched). */
static int build(struct mbfs *fs, struct mbfs_wbfile *v, const size_t *order,
		 size_t n, const struct mbfs_wbdir *dv, size_t nd,
		 struct mb_buf *b, struct mb_buf *inl)
{
	struct mb_buf list;
	mb_buf_init(&list, MB_BUF_UNLIMITED);
	int rc = 0;
	size_t group = 0;
	char rdir[MB_PATH_MAX], prefix[24];
	for (size_t k = 0; k < nd && !rc; k++) {
		if (!mbfs_wbdir_removes(dv[k].kind))
			continue;
		rc = mbfs_remote_path(fs, dv[k].path, rdir);
		if (!rc && dv[k].kind == MBFS_WBDIR_MV) {
			char rto[MB_PATH_MAX];
			rc = mbfs_remote_path(fs, dv[k].to, rto);
			if (!rc)
				rc = mb_buf_appendf(&list, "i%s %s\nv%s\nV%s\n",
						    dv[k].mv_id[0] ? dv[k].mv_id
								   : "-",
						    dv[k].ledger ?
						    dv[k].ledger : "-", rdir,
						    rto);
			continue;
		}
		if (!rc && dv[k].kind == MBFS_WBDIR_CHMOD) {
			rc = mb_buf_appendf(&list, "b%" PRIu64 " %lld\np%04o %s\n",
					    dv[k].base_size,
					    (long long)dv[k].base_mtime,
					    dv[k].mode & 07777, rdir);
			continue;
		}
		if (!rc && dv[k].kind == MBFS_WBDIR_RM && dv[k].base_known)
			rc = mb_buf_appendf(&list, "b%" PRIu64 " %lld\n",
					    dv[k].base_size,
					    (long long)dv[k].base_mtime);
		if (!rc)
			rc = mb_buf_appendf(&list, "%c%s\n",
					    dv[k].kind == MBFS_WBDIR_RM ? 'r' : 'R',
					    rdir);
	}
	for (size_t k = 0; k < nd && !rc; k++) {
		if (dv[k].kind != MBFS_WBDIR_MAKE)
			continue;
		rc = mbfs_remote_path(fs, dv[k].path, rdir);
		if (!rc)
			rc = mb_buf_appendf(&list, "%c%04o %s\n",
					    dv[k].doubt ? 'M' : 'm',
					    dv[k].mode & 07777, rdir);
	}
	for (size_t k = 0; k < n && !rc; k++) {
		const struct mbfs_wbfile *f = &v[order[k]];
		size_t dl = dir_len(f->path);
		bool opens = k == 0 || dl != dir_len(v[order[k - 1]].path) ||
			     memcmp(f->path, v[order[k - 1]].path, dl) != 0;
		if (opens) {
			char dir[MB_PATH_MAX];
			snprintf(dir, sizeof(dir), "%.*s", (int)dl, f->path);
			rc = mbfs_remote_path(fs, dl ? dir : "/", rdir);
			if (!rc)
				rc = mb_buf_appendf(&list, "d%s\n",
						    strcmp(rdir, "/") ? rdir : "");
		}
		if (!rc && f->base == MBFS_BASE_ABSENT)
			rc = mb_buf_appendf(&list, "b-\n");
		else if (!rc && f->base == MBFS_BASE_STAT)
			rc = mb_buf_appendf(&list, "b%" PRIu64 " %lld\n",
					    f->base_size,
					    (long long)f->base_mtime);
		if (!rc && f->keep_mode)
			rc = mb_buf_appendf(&list, "k\n");
		if (!rc)
			rc = mb_buf_appendf(&list, "f%s\n", f->path + dl + 1);
	}
	for (size_t k = 0; k < nd && !rc; k++) {
		char t[32];
		if (dv[k].kind == MBFS_WBDIR_MAKE || mbfs_wbdir_removes(dv[k].kind))
			continue;
		if (dv[k].kind == MBFS_WBDIR_TIME)
			mbfs_touch_time(t, &dv[k].mtime);
		rc = mbfs_remote_path(fs, dv[k].path, rdir);
		if (!rc && dv[k].kind == MBFS_WBDIR_TIME)
			rc = mb_buf_appendf(&list, "d%s\nt%s\n",
					    strcmp(rdir, "/") ? rdir : "", t);
		else if (!rc)
			rc = mb_buf_appendf(&list, "d%s\nc%04o\n",
					    strcmp(rdir, "/") ? rdir : "",
					    dv[k].mode & 07777);
	}
	/* names only, and short: the list goes in the command, no PUT */
	size_t quoted = list.len;
	for (size_t i = 0; list.data && i < list.len; i++)
		quoted += list.data[i] == '\'' ? 3 : 0;
	if (!rc && n == 0 && quoted <= INLINE_MAX) {
		rc = mb_buf_append(inl, list.data ? list.data : "", list.len);
		mb_buf_release(&list);
		return rc;
	}
	if (!rc)
		rc = tar_member(b, "", "list", list.data ? list.data : "",
				list.len, 0600, NULL);
	for (size_t k = 0; k < n && !rc; k++) {
		const struct mbfs_wbfile *f = &v[order[k]];
		size_t dl = dir_len(f->path);
		if (k > 0 && (dl != dir_len(v[order[k - 1]].path) ||
			      memcmp(f->path, v[order[k - 1]].path, dl) != 0))
			group++;
		snprintf(prefix, sizeof(prefix), "%zu", group);
		rc = tar_member(b, prefix, f->path + dl + 1, f->data, f->len,
				f->mode, &f->mtime);
	}
	/* the end: two zero blocks */
	static const char zero[2 * TAR_BLOCK];
	if (!rc)
		rc = mb_buf_append(b, zero, sizeof(zero));
	mb_buf_release(&list);
	return rc;
}

/* ---- sending ---- */

struct send {
	struct mbfs *fs;
	uint64_t deadline;
	char dir[64];               /* the mount's batch directory */
	char parts[MB_PATH_MAX];    /* DIR/wb-HEX: parts are .00000... */
	char stage[MB_PATH_MAX];    /* ROOT/.mbfs-up-HEX, where it unpacks */
	bool ran;                   /* apply.sh answered */
};

static void progress(struct send *s)
{
	s->deadline = mb_now_ms() + s->fs->op_ms;
	mb_op_deadline(s->deadline);
}

/* After a failed step: wait and return true when repeating may help. */
static bool again(struct send *s, const struct mb_err *e, unsigned *tries)
{
	if (!mb_err_is_transient(e) || mb_err_is_stopped(e))
		return false;
	uint64_t d = mb_backoff_ms((*tries)++, 100, 2000);
	if (mb_now_ms() + d >= s->deadline)
		return false;
	mb_log(MB_LOG_DEBUG, "%s: trying the batch again in %" PRIu64 " ms",
	       e->msg, d);
	mb_sleep_ms(d);
	return true;
}

static int put_part(struct send *s, size_t i, const char *data, size_t len,
		    struct mb_err *err)
{
	char p[MB_PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s.%05zu", s->parts, i);
	bool made = false;
	for (unsigned tries = 0;;) {
		mb_err_clear(err);
		int rc = mbfs_route_put(s->fs, p, data, len, err);
		if (rc == 0) {
			progress(s);
			return 0;
		}
		if (rc == -ENOENT && !made) {
			/* the batch directory is missing (the first batch, a
			 * cleaned /tmp): make it once, then repeat; one there
			 * already was made by an unconfirmed mkdir of ours */
			made = true;
			struct mb_err e2;
			mb_err_clear(&e2);
			int mrc = mbfs_route_mkdir_private(s->fs, s->dir, &e2);
			if (mrc == 0 || mrc == -EEXIST)
				continue;
		}
		if (!again(s, err, &tries))
			return rc;
	}
}

/* The i-th MAKE (removes: the i-th RM, RMDIR, MV or CHMOD) of dv, or
 * NULL. */
static struct mbfs_wbdir *nth_dir(struct mbfs_wbdir *dv, size_t nd,
				  uint64_t i, bool removes)
{
	for (size_t k = 0; k < nd; k++)
		if ((removes ? mbfs_wbdir_removes(dv[k].kind)
			     : dv[k].kind == MBFS_WBDIR_MAKE) && i-- == 0)
			return &dv[k];
	return NULL;
}

/* Where apply.sh's report lands: v (by order), dv's MAKEs and removals. */
struct landing {
	struct mbfs_wbfile *v;
	const size_t *order;
	size_t n;
	struct mbfs_wbdir *dv;
	size_t nd;
};

static int land(void *ud, char kind, uint64_t i, const char *why,
		size_t whylen)
{
	struct landing *l = ud;
	struct mbfs_wbdir *d;
	int *rc;
	char *w;
	if (kind == 'x' && i < l->n) {
		rc = &l->v[l->order[i]].rc;
		w = l->v[l->order[i]].why;
	} else if (kind == 'w' && i < l->nd &&
		   (d = nth_dir(l->dv, l->nd, i, true)) &&
		   d->kind == MBFS_WBDIR_MV) {
		d->one_file = true;
		return 0;
	} else if ((kind == 'y' || kind == 'z') && i < l->nd &&
		   (d = nth_dir(l->dv, l->nd, i, kind == 'z'))) {
		rc = &d->rc;
		w = d->why;
	} else {
		return -1;
	}
	*rc = -EIO;
	snprintf(w, sizeof(l->v->why), "%.*s",
		 (int)(whylen < sizeof(l->v->why) ? whylen : sizeof(l->v->why)),
		 why);
	return 0;
}

/* Read apply.sh's report (fuse/report.h) into v and dv's MAKEs and
 * removals. 0, or
 * -EIO (err set) when it is not whole or names no item of the batch. */
static int parse_report(const char *out, struct mbfs_wbfile *v,
			const size_t *order, size_t n, struct mbfs_wbdir *dv,
			size_t nd, struct mb_err *err)
{
	struct landing l = { v, order, n, dv, nd };
	uint64_t count;
	int rc = mbfs_report_apply(out, land, &l, &count, err);
	if (!rc && count != n)
		rc = mb_err_set(err, EIO, "apply.sh reports %llu files of %zu",
				(unsigned long long)count, n);
	return rc;
}

static int apply(struct send *s, struct mbfs_wbfile *v, const size_t *order,
		 size_t n, struct mbfs_wbdir *dv, size_t nd, size_t nparts,
		 const char *inl, struct mb_err *err)
{
	struct mb_buf b;
	char np[24], prev[MB_PATH_MAX];
	snprintf(np, sizeof(np), "%zu", nparts);
	if (inl)
		snprintf(np, sizeof(np), "-");
	pthread_mutex_lock(&prev_lock);
	snprintf(prev, sizeof(prev), "%s", prev_done[0] ? prev_done : "-");
	pthread_mutex_unlock(&prev_lock);
	const char *argv[] = { s->parts, np, s->stage, prev, inl };
	mb_buf_init(&b, MBFS_CMD_MAX);
	int rc = mbfs_sh_cmd(&b, mbfs_sh_apply, argv, inl ? 5 : 4);
	if (rc) {
		mb_buf_release(&b);
		return mb_err_set(err, ENAMETOOLONG, "command too long");
	}
	mbfs_reply res;
	for (unsigned tries = 0;;) {
		/* repeatable: a rerun prints the first run's report */
		rc = mbfs_exec(s->fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, err);
		if (rc == 0 || !again(s, err, &tries))
			break;
	}
	mb_buf_release(&b);
	if (rc)
		return rc;
	s->ran = true;
	progress(s);
	pthread_mutex_lock(&prev_lock);
	if ((strcmp(prev, "-") == 0 || strcmp(prev, prev_done) == 0) &&
	    snprintf(prev_done, sizeof(prev_done), "%s.done", s->parts) >=
	    (int)sizeof(prev_done))
		prev_done[0] = '\0';
	pthread_mutex_unlock(&prev_lock);
	if (res.has_exit_code && res.exit_code == APPLY_STAGE_SWAPPED)
		new_stage(s->fs);
	if (!mbfs_exec_ok(&res)) {
		rc = res.has_exit_code && (res.exit_code == 3 ||
					   res.exit_code == APPLY_STAGE_SWAPPED)
			? -EIO : mbfs_stderr_errno(res.errout);
		mb_err_set(err, -rc, "cannot apply the batch on the guest: %.200s",
			   res.errout && res.errout[0] ? res.errout : "failed");
	} else {
		struct mb_err perr;
		if ((rc = parse_report(res.out, v, order, n, dv, nd, &perr)))
			mb_err_set(err, EIO, "the guest's report of the batch "
				   "is not understood: %s", perr.msg);
	}
	mbfs_reply_release(&res);
	return rc;
}

int mbfs_wbsend(struct mbfs *fs, struct mbfs_wbfile *v, size_t n,
		struct mbfs_wbdir *dv, size_t nd, struct mb_err *err)
{
	struct send s = { .fs = fs };
	struct mb_buf arch;
	char hex[17];
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	int rc = 0;
	mb_err_clear(err);
	mb_buf_init(&arch, MB_BUF_UNLIMITED);
	if (!order) {
		rc = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		order[i] = i;
		v[i].rc = 0;
		v[i].why[0] = '\0';
	}
	for (size_t i = 0; i < nd; i++) {
		dv[i].rc = 0;
		dv[i].why[0] = '\0';
	}
	qsort_r(order, n, sizeof(*order), by_dir, v);
	if (mb_random_hex(hex, 8)) {
		rc = mb_err_set(err, EIO, "no random bytes");
		goto out;
	}
	rc = stage_name(fs, s.dir);
	if (rc) {
		mb_err_set(err, -rc, "cannot write the journal: %s", strerror(-rc));
		goto out;
	}
	snprintf(s.parts, sizeof(s.parts), "%s/wb-%s", s.dir, hex);
	if (snprintf(s.stage, sizeof(s.stage), "%s/" MBFS_STAGING_PREFIX "-%s",
		     fs->root, hex) >= (int)sizeof(s.stage)) {
		rc = mb_err_set(err, ENAMETOOLONG, "path too long");
		goto out;
	}
	struct mb_buf inl;
	mb_buf_init(&inl, MB_BUF_UNLIMITED);
	rc = build(fs, v, order, n, dv, nd, &arch, &inl);
	if (rc) {
		mb_err_set(err, -rc, "cannot build the batch: %s", strerror(-rc));
		goto out;
	}
	size_t nparts = (arch.len + MBFS_CHUNK - 1) / MBFS_CHUNK;
	/* noted before anything is staged: a crash or a failure leaves a
	 * note that a later sweep or mount acts on */
	char (*paths)[MB_PATH_MAX + 16] = calloc(nparts + 1, sizeof(*paths));
	const char **pp = calloc(nparts + 1, sizeof(*pp));
	unsigned note = 0;
	if (!paths || !pp) {
		free(paths);
		free(pp);
		rc = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nparts; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s.%05zu", s.parts, i);
		pp[i] = paths[i];
	}
	snprintf(paths[nparts], sizeof(paths[nparts]), "%s", s.stage);
	pp[nparts] = paths[nparts];
	rc = mbfs_journal_stage(fs->journal, pp, nparts + 1, &note);
	free(pp);
	free(paths);
	if (rc) {
		mb_err_set(err, -rc, "cannot write the journal: %s", strerror(-rc));
		goto out;
	}
	uint64_t outer = mb_op_deadline(0);
	progress(&s);
	for (size_t i = 0; i < nparts && !rc; i++) {
		size_t off = i * MBFS_CHUNK;
		size_t len = arch.len - off < MBFS_CHUNK ? arch.len - off : MBFS_CHUNK;
		rc = put_part(&s, i, arch.data + off, len, err);
	}
	if (!rc)
		rc = apply(&s, v, order, n, dv, nd, nparts,
			   inl.len ? inl.data : NULL, err);
	mb_buf_release(&inl);
	mb_op_deadline(outer);
	/* the script removes its staging whenever it ran; a sandbox that
	 * is gone takes it along */
	if (rc && !s.ran && !mb_err_is_stopped(err))
		mbfs_journal_leftover(fs->journal, note);
	else
		mbfs_journal_unstage(fs->journal, note);
	if (!rc)
		mbfs_xfer_sweep(fs);   /* the service answers again */
	mb_log(MB_LOG_DEBUG, "batch of %zu file%s (%zu directory change%s), "
	       "%zu byte%s in %zu part%s: %s", n, n == 1 ? "" : "s", nd,
	       nd == 1 ? "" : "s", arch.len, arch.len == 1 ? "" : "s", nparts,
	       nparts == 1 ? "" : "s", rc ? err->msg : "done");
out:
	mb_buf_release(&arch);
	free(order);
	return mbfs_fail(fs, rc, err);
}

void mbfs_wbsend_finish(struct mbfs *fs)
{
	char dir[64];
	pthread_mutex_lock(&prev_lock);
	memcpy(dir, stage_dir, sizeof(dir));
	unsigned note = stage_note;
	stage_dir[0] = prev_done[0] = '\0';
	stage_note = 0;
	pthread_mutex_unlock(&prev_lock);
	if (!dir[0] || mbfs_check_alive(fs))
		return;   /* none made; or the sandbox is gone, and its /tmp */
	/* the last batch's report, and whatever a failure left */
	struct mb_err err;
	mb_err_clear(&err);
	uint64_t outer = mb_op_deadline(mb_now_ms() + 5000);
	int rc = mbfs_route_remove_tree(fs, dir, &err);
	mb_op_deadline(outer);
	if (note && (rc == 0 || rc == -ENOENT))
		mbfs_journal_unstage(fs->journal, note);
}
