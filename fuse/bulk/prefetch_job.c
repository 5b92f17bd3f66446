/* prefetch_job.c: one run of fuse/guest/pack.sh for a bulk read or a
 * listing walk (prefetch.h): the exec, its report, its pieces fetched in
 * parallel, members into the data cache and listings into the attribute
 * cache. Decides nothing (prefetch.c does). */
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
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/bulk/pack.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/tarread.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"
#include "fuse/bulk/prefetch_int.h"

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
	if (m->mtime >= j->now || j->p->ours(j->fs, path))
		return 0;
	int rc = mbfs_pread_all(j->fd, j->buf, (size_t)m->size, m->off);
	char *local = NULL;
	int fd = -1;
	bool mem = mbfs_data_mem_room(j->fs->data, m->size);
	if (!rc)
		rc = mem ? mbfs_data_memfile(&fd)
			 : mbfs_data_newfile(j->fs->data, &local, &fd);
	if (!rc)
		rc = mbfs_pwrite_all(fd, j->buf, (size_t)m->size, 0);
	if (!mem && fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (rc) {
		if (mem && fd >= 0)
			close(fd);
		mbfs_data_discard(local);
		return rc;
	}
	/* not over what the mount wrote or sent since the walk began: the
	 * walk may have seen the version before, with the same size and
	 * whole-second mtime */
	mbfs_data_put_fetched(j->fs->data, path, m->size, m->mtime, local,
			      mem ? fd : -1, j->stamp);
	j->put++;
	return 0;
}

/* pack.sh's report (fuse/report.h) into j. */
static int parse_report(struct job *j, const char *out, struct mb_err *err)
{
	struct mbfs_pack_report r;
	/* a walk's listings in the answer itself: "@" and their base64 on
	 * the line after the first (pack.sh) */
	const char *at = out ? strstr(out, "\n@") : NULL;
	char *head = NULL;
	if (at) {
		const char *b64 = at + 2;
		size_t n = strcspn(b64, "\n");
		unsigned char *text = NULL;
		size_t len = 0;
		if (!j->listings || mb_base64_decode(b64, n, &text, &len) || !len) {
			free(text);
			return mb_err_set(err, EIO, "pack.sh's listings in its "
					  "answer are not base64");
		}
		j->inl = (char *)text;
		j->inl_len = len;
		if (!(head = strndup(out, (size_t)(at - out) + 1)))
			return mb_err_set(err, ENOMEM, "out of memory");
		out = head;
	}
	/* pack.sh stops before CAPBYTES; the pieces hold at most one file
	 * past it and the listings */
	int rc = mbfs_report_pack(out, 2 * MBFS_PREFETCH_BYTES / MBFS_CHUNK + 8,
				  2 * MBFS_PREFETCH_BYTES + MBFS_PREFETCH_LS_MAX,
				  &r, err);
	j->now = r.now;
	j->files = (size_t)r.files;
	j->cut = r.cut;
	j->ls = r.ls;
	j->pieces.total = r.total;
	if (!rc && r.n) {
		j->pieces.sizes = r.sizes;
		j->pieces.n = r.n;
	} else {
		free(r.sizes);
	}
	if (!rc && j->inl && (r.n || r.files || r.cut || r.ls))
		rc = mb_err_set(err, EIO, "pack.sh gave its listings twice");
	free(head);
	return rc;
}

void mbfs_prefetch_leave(struct mbfs_prefetch *p, struct mbfs *fs, char *dir,
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
	snprintf(files, sizeof(files), "%u", j->listings ? 0 : MBFS_PREFETCH_FILES);
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
	/* the listings carry the sandbox's times: queued ones stay queued,
	 * the view shows them on top (a read never sends); a change of ours
	 * from now on keeps the listings out of the cache */
	j->ctr = mbfs_cache_counter(fs->cache);
	j->stamp = mbfs_data_stamp(fs->data);
	mbfs_reply res;
	if (rc) {
		mb_err_set(err, -rc, "command too long");
	} else {
		j->pieces.note = mbfs_xfer_note_dir(fs, j->pieces.dir);
		rc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, err);
	}
	mb_buf_release(&b);
	if (rc) {
		/* prev is still there, or may be */
		mbfs_prefetch_leave(j->p, fs, prev, prev_note);
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
	} else if ((rc = parse_report(j, res.out, err))) {
		/* the directory is ours whatever it said */
		if (!j->pieces.sizes)
			j->pieces.sizes = calloc(1, sizeof(uint64_t));
	}
	mbfs_reply_release(&res);
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
		struct mb_err terr;
		rc = mbfs_tar_walk(j->fd, j->pieces.total - j->ls, unpack_one, j,
				   &terr);
		if (rc)
			mb_err_set(err, -rc, "cannot unpack the archive: %s",
				   terr.msg[0] ? terr.msg : strerror(-rc));
	}
	char *text = !rc && j->ls ? malloc(j->ls) : NULL;
	struct mb_err perr;
	if (text && !mbfs_pread_all(j->fd, text, j->ls, j->pieces.total - j->ls) &&
	    mbfs_pack_listings(fs, j->base, text, j->ls, j->ctr, &perr))
		mb_log(MB_LOG_WARN, "bulk read of '%s': its listings are "
		       "damaged, not kept: %s", j->base, perr.msg);
	free(text);
	free(j->buf);
	close(j->fd);
	mbfs_data_discard(scratch);
	return rc;
}

bool mbfs_prefetch_run(struct job *j)
{
	struct mb_err err;
	mb_err_clear(&err);
	uint64_t t0 = mb_now_ms();
	int rc = pack(j, &err);
	if (!rc && j->pieces.n)
		rc = unpack(j, &err);
	struct mb_err perr;
	if (!rc && j->inl &&
	    mbfs_pack_listings(j->fs, j->base, j->inl, j->inl_len, j->ctr, &perr))
		mb_log(MB_LOG_WARN, "bulk listing of '%s': its listings are "
		       "damaged, not kept: %s", j->base, perr.msg);
	free(j->inl);
	j->inl = NULL;
	if (rc) {
		mb_log(MB_LOG_WARN, "bulk %s of '%s' failed, %s one by one: %s",
		       j->listings ? "listing" : "read", j->base,
		       j->listings ? "directories are listed" : "files are read",
		       err.msg[0] ? err.msg : strerror(-rc));
		return false;
	}
	mb_log(MB_LOG_DEBUG, "bulk read of '%s': %zu files (%zu kept), %"
	       PRIu64 " bytes in %zu pieces, %s, %" PRIu64 " ms", j->base,
	       j->files, j->put, j->pieces.total, j->pieces.n,
	       j->cut ? "cut by the caps" : "whole", mb_now_ms() - t0);
	return !j->cut;
}

