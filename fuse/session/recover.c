/* recover.c: replaying the journals of ended mounts at mount (see
 * recover.h). The journal walks them; this file decides, per file, upload
 * or keep, and talks to the guest through xfer (uploads) and the API
 * (a stat, a chmod, one exec to remove staging). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/durable/fdio.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/transport/route.h"
#include "fuse/session/recover.h"
#include "fuse/transport/remote.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbsend.h"
#include "fuse/transport/xfer.h"

/* A small file whose upload waits for the end of its run directory, to
 * go in a batch with the others (flush). */
struct small {
	char *local;
	struct mbfs_jrec r;
	char rel[MB_PATH_MAX];
};

struct replay {
	struct mbfs *fs;
	unsigned uploaded, kept, left;
	struct small *small;         /* those answered LATER, in order */
	size_t nsmall, capsmall;
	/* outbox times and modes, sent after the files (their renames
	 * move directories' mtimes) */
	struct mbfs_wbdir *late;
	size_t nlate;
};

/* conflict: kept because the sandbox's file changed since (wbq.h). */
static enum mbfs_jact keep(struct replay *x, const char *local,
			   const char *rpath, const char *why, bool conflict)
{
	char out[PATH_MAX];
	int rc = mbfs_journal_keep(x->fs->journal, local, rpath, why, out,
				   sizeof(out));
	if (rc) {
		mb_log(MB_LOG_ERR, "'%s' was written before mbfs stopped and "
		       "not uploaded (%s); cannot move it under kept/ (%s): "
		       "it stays in %s", rpath ? rpath : "(unknown path)", why,
		       strerror(-rc), local);
		x->left++;
		return MBFS_J_LEAVE;
	}
	mb_log(MB_LOG_WARN, "'%s' was written before mbfs stopped and not "
	       "uploaded: %s; data kept in %s", rpath ? rpath : "(unknown path)",
	       why, out);
	/* reported as a failed batch's files are: at the next sync */
	mbfs_wbq_note_failed(x->fs, 1, rpath ? rpath : local, why, conflict);
	x->kept++;
	return MBFS_J_DONE;
}

/* Is the guest's file at r->rpath still the one r was written against?
 * 1 yes, 0 no (*why says how it differs), -errno when the guest could not
 * tell. */
static int still_base(struct mbfs *fs, const struct mbfs_jrec *r,
		      const char **why, char *buf, size_t n, unsigned *mode)
{
	struct mb_entry e;
	struct mb_err err;
	mb_err_clear(&err);
	int rc = mbfs_route_lstat(fs, r->rpath, &e, &err);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		*why = "the file was removed on the sandbox since";
		return r->fresh;
	}
	if (rc) {
		snprintf(buf, n, "%s", err.msg);
		*why = buf;
		return rc;
	}
	int ok = 0;
	char sha[65];
	*mode = e.mode & 07777;
	if (r->fresh)
		*why = "a file of that name was made on the sandbox since";
	else if (e.type != MB_FT_FILE)
		*why = "it is no longer a regular file on the sandbox";
	else if (!r->base_known)
		*why = "the file it replaces on the sandbox is unknown";
	else if (e.size != r->base_size)
		*why = "the file changed on the sandbox since";
	else if (e.mtime == r->base_mtime)
		ok = 1;
	/* our own upload: its mtime was our guess, its hash is certain */
	else if (r->base_sha[0] && mbfs_remote_sha256(fs, r->rpath, sha) == 0 &&
		 strcmp(sha, r->base_sha) == 0)
		ok = 1;
	else
		*why = "the file changed on the sandbox since";
	mb_entry_release(&e);
	return ok;
}

/* Does the guest's file at r->rpath hold exactly the bytes of local? A
 * batch or an upload in flight when mbfs stopped may have landed after
 * all; that is no conflict. */
static bool landed(struct mbfs *fs, const char *local, const struct mbfs_jrec *r)
{
	char want[65], got[65];
	unsigned char buf[65536];
	struct mb_sha256 h;
	ssize_t n;
	int fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	mb_sha256_init(&h);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		mb_sha256_update(&h, buf, (size_t)n);
	close(fd);
	if (n < 0)
		return false;
	mb_sha256_final_hex(&h, want);
	return mbfs_remote_sha256(fs, r->rpath, got) == 0 && strcmp(want, got) == 0;
}

/* A new file's directories may have been queued behind it (wbq.h: a
 * mkdir waits for the next batch, as files do) when mbfs stopped: make
 * them, with the mode a mkdir under umask 022 gives, rather than keep the
 * file away from where it was written. 0 or -errno. */
static int make_parents(struct mbfs *fs, const char *rpath)
{
	char dir[MB_PATH_MAX];
	const char *slash = strrchr(rpath, '/');
	if (!slash || slash == rpath ||
	    (size_t)(slash - rpath) >= sizeof(dir))
		return -ENOENT;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - rpath), rpath);
	struct mb_err err;
	mb_err_clear(&err);
	int rc = mbfs_route_mkdirs(fs, dir, &err);
	if (rc == 0)
		mb_log(MB_LOG_INFO, "'%s' was made before mbfs stopped and not "
		       "yet on the sandbox: made now (mode 0755)", dir);
	return rc;
}

/* r's guest path as a path of this mount, into rel; false when it is
 * outside this mount's directory (a mount of another one left it). */
static bool mount_path(const struct mbfs *fs, const char *rpath,
		       char rel[MB_PATH_MAX])
{
	size_t rl = strlen(fs->root);
	if (strncmp(rpath, fs->root, rl) != 0 || rpath[rl] != '/')
		return false;
	snprintf(rel, MB_PATH_MAX, "%s", rpath + rl);
	return true;
}

/* A small file as a batch of one (wbsend.h): it gets its mode and the
 * time the working copy kept (wbnode.c), as it would have in its batch,
 * and lands only where no directory on its way is a symlink. */
static int send_small(struct mbfs *fs, int fd, const struct stat *st,
		      const char *rel, unsigned mode, struct mb_err *err)
{
	struct mbfs_wbfile f;
	memset(&f, 0, sizeof(f));
	f.path = strdup(rel);
	f.len = (size_t)st->st_size;
	f.data = malloc(f.len ? f.len : 1);
	f.mode = mode;
	f.mtime = st->st_mtim;
	int rc = f.path && f.data ? mbfs_pread_all(fd, f.data, f.len, 0)
				  : -ENOMEM;
	if (rc)
		mb_err_set(err, -rc, "cannot read the copy of '%s': %s", rel,
			   strerror(-rc));
	else if (!(rc = mbfs_wbsend(fs, &f, 1, NULL, 0, err)) && f.rc)
		/* apply.sh's word for a directory not there (yet) */
		rc = mb_err_set(err, strstr(f.why, "no such directory")
				? ENOENT : -f.rc, "%s",
				f.why[0] ? f.why : strerror(-f.rc));
	free(f.path);
	free(f.data);
	return rc;
}

/* Upload local as r says (gmode: the mode of the guest's file it
 * replaces); 0 or -errno with err. */
static int upload(struct mbfs *fs, const char *local,
		  const struct mbfs_jrec *r, unsigned gmode, struct mb_err *err)
{
	struct stat st;
	int fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return mb_err_set(err, e, "cannot read '%s': %s", local,
				  strerror(e));
	}
	char rel[MB_PATH_MAX];
	int rc;
	unsigned mode;
	if ((uint64_t)st.st_size <= MBFS_CHUNK && mount_path(fs, r->rpath, rel) &&
	    mbfs_wbsend_fits(rel)) {
		mode = r->fresh ? r->mode & 07777 : gmode;
		rc = send_small(fs, fd, &st, rel, mode, err);
		if (rc == -ENOENT && r->fresh && make_parents(fs, r->rpath) == 0) {
			mb_err_clear(err);
			rc = send_small(fs, fd, &st, rel, mode, err);
		}
		mode = 0;   /* the batch gave it */
	} else {
		/* a new file is 0600 on the guest: give it the asked mode */
		mode = r->fresh && (r->mode & 0777) != 0600 ? r->mode & 0777 : 0;
		rc = mbfs_xfer_put(fs, r->rpath, fd, (uint64_t)st.st_size,
				   &mode, NULL, err);
		if (rc == -ENOENT && r->fresh && make_parents(fs, r->rpath) == 0) {
			mb_err_clear(err);
			rc = mbfs_xfer_put(fs, r->rpath, fd, (uint64_t)st.st_size,
					   &mode, NULL, err);
		}
	}
	close(fd);
	if (rc == 0 && mode) {   /* one PUT: a chmod after */
		struct mb_err e2;
		mb_err_clear(&e2);
		if (mbfs_route_chmod(fs, r->rpath, mode, &e2))
			mb_log(MB_LOG_WARN, "cannot give '%s' mode %04o: %s",
			       r->rpath, mode, e2.msg);
	}
	if (rc == 0)
		mb_log(MB_LOG_INFO, "'%s' was written before mbfs stopped: "
		       "uploaded now (%" PRIu64 " bytes)", r->rpath,
		       (uint64_t)st.st_size);
	return rc;
}

/* One dirty copy of the attached generation, on its own: looked at on
 * the guest, then uploaded or kept. */
static enum mbfs_jact one_dirty(struct replay *x, const char *local,
				const struct mbfs_jrec *r)
{
	struct mbfs *fs = x->fs;
	char why[MB_GEN_MAX + 128];
	const char *differs = "";
	char msg[512];
	unsigned gmode = 0644;
	int rc = still_base(fs, r, &differs, msg, sizeof(msg), &gmode);
	if (rc < 0) {
		mb_log(MB_LOG_WARN, "'%s' was written before mbfs stopped and not "
		       "uploaded; the sandbox could not be asked (%s): it is "
		       "tried again at the next mount", r->rpath, differs);
		x->left++;
		return MBFS_J_LEAVE;
	}
	if (rc == 0 && landed(fs, local, r)) {
		mb_log(MB_LOG_INFO, "'%s' was written before mbfs stopped: the "
		       "sandbox has it already", r->rpath);
		x->uploaded++;
		return MBFS_J_DONE;
	}
	if (rc == 0)
		return keep(x, local, r->rpath, differs, true);
	struct mb_err err;
	mb_err_clear(&err);
	if (upload(fs, local, r, gmode, &err)) {
		snprintf(why, sizeof(why), "the upload failed: %.100s", err.msg);
		return keep(x, local, r->rpath, why, false);
	}
	x->uploaded++;
	return MBFS_J_DONE;
}

/* Can r's copy local wait for a batch (flush)? A new file, or a rewrite
 * whose base is known (the batch checks on the guest that nothing is
 * there, or that the file is still that one: no stat of its own), small
 * enough for a batch, under this mount's directory. */
static bool batchable(struct mbfs *fs, const char *local,
		      const struct mbfs_jrec *r, char rel[MB_PATH_MAX])
{
	struct stat st;
	return (r->fresh || r->base_known) && stat(local, &st) == 0 &&
	       (uint64_t)st.st_size <= MBFS_WBQ_FILE_MAX &&
	       mount_path(fs, r->rpath, rel) && mbfs_wbsend_fits(rel);
}

static enum mbfs_jact on_dirty(void *ud, const char *local,
			       const struct mbfs_jrec *r)
{
	struct replay *x = ud;
	struct mbfs *fs = x->fs;
	char why[MB_GEN_MAX + 128];
	if (!r)
		return keep(x, local, NULL, "its journal record is unreadable",
			    false);
	if (strcmp(r->ident.created_at, fs->ident.created_at) != 0) {
		snprintf(why, sizeof(why), "it was written for generation %s, "
			 "which is no longer running", r->ident.created_at);
		return keep(x, local, r->rpath, why, false);
	}
	char rel[MB_PATH_MAX];
	if (!batchable(fs, local, r, rel))
		return one_dirty(x, local, r);
	if (x->nsmall == x->capsmall) {
		size_t cap = x->capsmall ? 2 * x->capsmall : 64;
		struct small *v = realloc(x->small, cap * sizeof(*v));
		if (!v)
			return one_dirty(x, local, r);
		x->small = v;
		x->capsmall = cap;
	}
	struct small *sm = &x->small[x->nsmall];
	if (!(sm->local = strdup(local)))
		return one_dirty(x, local, r);
	sm->r = *r;
	memcpy(sm->rel, rel, sizeof(rel));
	x->nsmall++;
	return MBFS_J_LATER;
}

/* A batch of the small files v[0..n) (wbsend.h): each lands with the
 * time its copy kept, a new one with its mode where no file is yet, a
 * rewrite over the file it was written against, keeping that one's mode.
 * Those that did not go in it (a conflict, say) get their own turn
 * (one_dirty: it looks, then keeps them), unless the sandbox could not be
 * reached: then they wait for the next mount. */
static void send_smalls(struct replay *x, struct small *v, size_t n,
			enum mbfs_jact *acts)
{
	struct mbfs *fs = x->fs;
	struct mbfs_wbfile *fv = calloc(n, sizeof(*fv));
	struct mb_err err;
	int rc = fv ? 0 : -ENOMEM;
	mb_err_clear(&err);
	for (size_t i = 0; i < n && !rc; i++) {
		struct stat st;
		int fd = open(v[i].local, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st)) {
			rc = -EIO;
		} else {
			fv[i].path = strdup(v[i].rel);
			fv[i].len = (size_t)st.st_size;
			fv[i].data = malloc(fv[i].len ? fv[i].len : 1);
			fv[i].mtime = st.st_mtim;
			if (v[i].r.fresh) {
				fv[i].mode = v[i].r.mode & 07777;
				fv[i].base = MBFS_BASE_ABSENT;
			} else {
				/* the sandbox's file keeps its mode */
				fv[i].mode = 0644;
				fv[i].keep_mode = true;
				fv[i].base = MBFS_BASE_STAT;
				fv[i].base_size = v[i].r.base_size;
				fv[i].base_mtime = v[i].r.base_mtime;
			}
			rc = fv[i].path && fv[i].data
			     ? mbfs_pread_all(fd, fv[i].data, fv[i].len, 0) : -ENOMEM;
		}
		if (fd >= 0)
			close(fd);
	}
	if (!rc)
		rc = mbfs_wbsend(fs, fv, n, NULL, 0, &err);
	bool away = rc && mb_err_is_transient(&err);
	unsigned sent = 0;
	for (size_t i = 0; i < n; i++) {
		if (!rc && !fv[i].rc) {
			acts[i] = MBFS_J_DONE;
			sent++;
		} else if (away) {
			acts[i] = MBFS_J_LEAVE;
			x->left++;
		} else {
			acts[i] = one_dirty(x, v[i].local, &v[i].r);
		}
		if (fv) {
			free(fv[i].path);
			free(fv[i].data);
		}
	}
	free(fv);
	x->uploaded += sent;
	if (sent)
		mb_log(MB_LOG_INFO, "%u file%s written before mbfs stopped: "
		       "uploaded now in one batch", sent, sent == 1 ? "" : "s");
	if (away)
		mb_log(MB_LOG_WARN, "%zu file%s written before mbfs stopped "
		       "wait for the next mount: %s", n, n == 1 ? "" : "s",
		       err.msg);
}

static void on_flush(void *ud, enum mbfs_jact *acts, size_t count)
{
	struct replay *x = ud;
	size_t start = 0;
	uint64_t bytes = 0;
	for (size_t i = 0; i <= count && count == x->nsmall; i++) {
		struct stat st;
		uint64_t len = i < count && stat(x->small[i].local, &st) == 0
			       ? (uint64_t)st.st_size : 0;
		if (i == count || (i > start &&
				   (i - start >= MBFS_WBQ_BATCH_FILES ||
				    bytes + len > MBFS_WBQ_BATCH_MAX))) {
			if (i > start)
				send_smalls(x, x->small + start, i - start,
					    acts + start);
			start = i;
			bytes = 0;
		}
		bytes += len;
	}
	for (size_t i = 0; i < x->nsmall; i++)
		free(x->small[i].local);
	x->nsmall = 0;
}

/* Only ever remove what our uploads stage, our batches' directories and
 * what is in them, and our downloads' pieces (a damaged note must not
 * name anything else): /tmp/.mbfs-up-X, /tmp/.mbfs-wb-X[/Y],
 * /tmp/.mbfs-dl-X, the legacy /tmp/.mbfs-up/..., DIR/.mbfs-up-X. */
static int is_ours(const char *p)
{
	static const char *const tops[] = { "/tmp/.mbfs-up-", "/tmp/.mbfs-wb-",
					    "/tmp/.mbfs-dl-" };
	const char *base = strrchr(p, '/');
	if (p[0] != '/' || strstr(p, "/../") || strstr(p, "/./") || !base ||
	    !base[1] || strcmp(base, "/..") == 0)
		return 0;
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		size_t l = strlen(tops[i]);
		const char *rest = p + l, *sl;
		if (strncmp(p, tops[i], l) != 0 || !*rest || *rest == '/')
			continue;
		sl = strchr(rest, '/');
		/* only a batch directory has files of ours directly in it */
		return !sl || (i == 1 && !strchr(sl + 1, '/'));
	}
	return strncmp(p, "/tmp/" MBFS_STAGING_PREFIX "/",
		       sizeof("/tmp/" MBFS_STAGING_PREFIX "/") - 1) == 0 ||
	       mbfs_xfer_is_staging(base + 1);
}

static enum mbfs_jact on_staged(void *ud, const struct mbfs_jrec *owner,
				const char *const *paths, size_t count)
{
	struct replay *x = ud;
	struct mbfs *fs = x->fs;
	if (strcmp(owner->ident.created_at, fs->ident.created_at) != 0)
		return MBFS_J_DONE;   /* that sandbox is gone, and its /tmp */
	struct mb_buf b;
	mb_buf_init(&b, MB_MAX_FILE_BYTES);
	int rc = mb_buf_appends(&b, MBFS_SH_ARGS), n = 0;
	for (size_t i = 0; i < count && !rc; i++) {
		if (!is_ours(paths[i]))
			continue;
		rc = mbfs_sh_arg(&b, paths[i]);
		n++;
	}
	if (!rc && n && !(rc = mbfs_sh_body(&b, mbfs_sh_unstage)))
		rc = mbfs_exec_simple(fs, b.data, MBFS_EXEC_TIMEOUT_MS);
	mb_buf_release(&b);
	if (rc)
		mb_log(MB_LOG_WARN, "cannot remove the staging an earlier mount "
		       "left on the sandbox: %s (tried again at the next mount)",
		       strerror(-rc));
	return rc ? MBFS_J_LEAVE : MBFS_J_DONE;
}

/* One batch of the outbox's changes (no files); its failures logged. 0,
 * or -errno when it did not run. */
static int send_ops(struct mbfs *fs, struct mbfs_wbdir *dv, size_t nd)
{
	struct mb_err err;
	mb_err_clear(&err);
	int rc = mbfs_wbsend(fs, NULL, 0, dv, nd, &err);
	if (rc) {
		mb_log(MB_LOG_WARN, "cannot replay %zu change%s queued before "
		       "mbfs stopped: %s", nd, nd == 1 ? "" : "s", err.msg);
		return rc;
	}
	for (size_t i = 0; i < nd; i++)
		if (dv[i].rc)
			mb_log(MB_LOG_WARN, "'%s' was %s before mbfs stopped; "
			       "that cannot be done on the sandbox now: %s",
			       dv[i].path, dv[i].kind == MBFS_WBDIR_MAKE
			       ? "made" : dv[i].kind == MBFS_WBDIR_MV
			       ? "renamed" : dv[i].kind == MBFS_WBDIR_CHMOD
			       ? "given a mode" : "removed", dv[i].why);
	return 0;
}

static enum mbfs_jact on_outbox(void *ud, const struct mbfs_jrec *owner,
				const struct mbfs_jop *ops, size_t count)
{
	struct replay *x = ud;
	struct mbfs *fs = x->fs;
	if (strcmp(owner->ident.created_at, fs->ident.created_at) != 0)
		return MBFS_J_DONE;   /* that sandbox is gone */
	struct mbfs_wbdir *dv = calloc(count, sizeof(*dv));
	char (*rel)[MB_PATH_MAX] = calloc(count, sizeof(*rel));
	char (*rel_to)[MB_PATH_MAX] = calloc(count, sizeof(*rel_to));
	enum mbfs_jact act = MBFS_J_LEAVE;
	size_t n = 0, start = 0;
	if (!dv || !rel || !rel_to)
		goto out;
	for (size_t i = 0; i < count; i++) {
		if (!mount_path(fs, ops[i].rpath, rel[i]) ||
		    (ops[i].kind == 'v' &&
		     !mount_path(fs, ops[i].rto, rel_to[i]))) {
			mb_log(MB_LOG_INFO, "changes queued by a mount of another "
			       "directory wait for a mount of it ('%s')",
			       ops[i].rpath);
			goto out;
		}
	}
	for (size_t i = 0; i < count; i++) {
		static const enum mbfs_wbdir_kind kinds[128] = {
			['T'] = MBFS_WBDIR_TIME, ['M'] = MBFS_WBDIR_MAKE,
			['C'] = MBFS_WBDIR_MODE, ['r'] = MBFS_WBDIR_RM,
			['R'] = MBFS_WBDIR_RMDIR, ['v'] = MBFS_WBDIR_MV,
			['p'] = MBFS_WBDIR_CHMOD,
		};
		struct mbfs_wbdir *d = &dv[n];
		d->path = rel[i];
		d->to = rel_to[i];
		memcpy(d->mv_id, ops[i].mv_id, sizeof(d->mv_id));
		d->ledger = ops[i].ledger[0] ? ops[i].ledger : NULL;
		d->kind = kinds[(unsigned char)ops[i].kind & 127];
		d->mode = ops[i].mode;
		d->mtime = ops[i].mtime;
		d->base_known = ops[i].base_known;
		d->base_size = ops[i].base_size;
		d->base_mtime = ops[i].base_mtime;
		if (d->kind == MBFS_WBDIR_TIME || d->kind == MBFS_WBDIR_MODE) {
			struct mbfs_wbdir *v = realloc(x->late, (x->nlate + 1) *
						       sizeof(*v));
			if (v && (d->path = strdup(rel[i]))) {
				x->late = v;
				x->late[x->nlate++] = *d;
			} else if (v) {
				x->late = v;
			}
			continue;
		}
		/* a removal after a mkdir starts the next batch (wbsend.h) */
		if (mbfs_wbdir_removes(d->kind) && n > start &&
		    !mbfs_wbdir_removes(dv[n - 1].kind)) {
			if (send_ops(fs, dv + start, n - start))
				goto out;
			start = n;
		}
		n++;
	}
	if (n > start && send_ops(fs, dv + start, n - start))
		goto out;
	if (n)
		mb_log(MB_LOG_INFO, "%zu mkdir%s, removal%s and move%s queued "
		       "before mbfs stopped: sent now", n, n == 1 ? "" : "s",
		       n == 1 ? "" : "s", n == 1 ? "" : "s");
	act = MBFS_J_DONE;
out:
	free(dv);
	free(rel);
	free(rel_to);
	return act;
}

unsigned mbfs_recover(struct mbfs *fs)
{
	struct replay x = { .fs = fs };
	struct mbfs_jreplay ops = { on_dirty, on_staged, on_outbox, on_flush, &x };
	int rc = mbfs_journal_replay(fs->journal, &ops);
	if (rc)
		mb_log(MB_LOG_WARN, "cannot read the journals of earlier mounts: "
		       "%s", strerror(-rc));
	if (x.nlate)   /* best effort, as in a batch */
		send_ops(fs, x.late, x.nlate);
	for (size_t i = 0; i < x.nlate; i++)
		free(x.late[i].path);
	free(x.late);
	free(x.small);
	if (x.kept)
		mb_log(MB_LOG_WARN, "%u file%s written before mbfs stopped could "
		       "not be uploaded and %s kept under the cache directory "
		       "(listed in %s/%s)", x.kept, x.kept == 1 ? "" : "s",
		       x.kept == 1 ? "is" : "are", fs->mountpoint,
		       MB_CONTROL_NAME);
	return x.kept;
}
