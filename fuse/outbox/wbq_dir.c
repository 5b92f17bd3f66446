/* wbq_dir.c: the write-back queue's entries of names other than files
 * (wbq.h): mkdirs queued and shown until they land (newdir.h), modes and
 * times set behind the files queued before them, removals shown as done
 * until they land (gone.h); each noted in the journal's outbox log. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/outbox/batch.h"
#include "fuse/outbox/gone.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/sink.h"
#include "fuse/outbox/newdir.h"
#include "fuse/outbox/pathsel.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_int.h"
#include "fuse/outbox/wbsend.h"

/* Note e (as it is now) in the journal's outbox log: a crash before it
 * lands replays it (recover.c). q->lock held: the log is a local append. */
static void note(struct mbfs *fs, struct mbfs_wbq_entry *e)
{
	static const char kinds[] = {
		[MBFS_WBDIR_TIME] = 'T', [MBFS_WBDIR_MAKE] = 'M',
		[MBFS_WBDIR_MODE] = 'C', [MBFS_WBDIR_RM] = 'r',
		[MBFS_WBDIR_RMDIR] = 'R', [MBFS_WBDIR_MV] = 'v',
		[MBFS_WBDIR_CHMOD] = 'p',
	};
	struct mbfs_jop op;
	memset(&op, 0, sizeof(op));
	if (!fs->journal || mbfs_remote_path(fs, e->dpath, op.rpath) ||
	    (e->dto && mbfs_remote_path(fs, e->dto, op.rto)) ||
	    (e->dto && mbfs_wbsend_ledger(fs, op.ledger)))
		return;
	memcpy(op.mv_id, e->mv_id, sizeof(op.mv_id));
	op.kind = kinds[e->kind];
	op.mode = e->dmode;
	op.mtime = e->dtime;
	op.base_known = e->base_known;
	op.base_size = e->base_size;
	op.base_mtime = e->base_mtime;
	mbfs_journal_op(fs->journal, &op, &e->jid);
}

struct mbfs_wbq_entry *mbfs_wbq_append_dir_locked(struct mbfs_wbq *q, const char *path,
					 enum mbfs_wbdir_kind kind)
{
	struct mbfs_wbq_entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->dpath = strdup(path))) {
		free(e);
		return NULL;
	}
	e->kind = kind;
	mbfs_wbq_append_locked(q, e);
	if (mbfs_wbdir_removes(kind))
		q->removes++;
	if (kind == MBFS_WBDIR_CHMOD)
		q->chmods++;
	else if (kind != MBFS_WBDIR_MAKE)
		q->dirs++;
	pthread_cond_broadcast(&q->cond);
	return e;
}

bool mbfs_wbq_mkdir(struct mbfs *fs, const char *path, const struct stat *st)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || !mbfs_wbsend_fits(path))
		return false;
	bool queued = false;
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	if (q->running && !q->stop &&
	    mbfs_newdir_add(fs->newdirs, path, st) == 0) {
		struct mbfs_wbq_entry *e = mbfs_wbq_append_dir_locked(q, path, MBFS_WBDIR_MAKE);
		if (e) {
			e->dmode = st->st_mode & 07777;
			note(fs, e);
		} else
			mbfs_newdir_remove(fs->newdirs, path);
		queued = e != NULL;
	}
	pthread_mutex_unlock(&q->lock);
	return queued;
}

bool mbfs_wbq_dir_mode(struct mbfs *fs, const char *path, unsigned perm)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || !mbfs_wbsend_fits(path))
		return false;
	struct mbfs_wbq_entry *mine = NULL;
	pthread_mutex_lock(&q->lock);
	for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		if (e->n || e->kind == MBFS_WBDIR_TIME ||
		    mbfs_wbdir_removes(e->kind) || strcmp(e->dpath, path) != 0)
			continue;
		/* the last one of the path, if not on its way yet */
		mine = e->inflight ? NULL : e;
	}
	if (mine && mine->kind == MBFS_WBDIR_MAKE)
		mbfs_newdir_set_perm(fs->newdirs, path, perm);
	if (!mine && q->running && !q->stop)
		mine = mbfs_wbq_append_dir_locked(q, path, MBFS_WBDIR_MODE);
	if (mine) {
		mine->dmode = perm & 07777;
		note(fs, mine);
	}
	pthread_mutex_unlock(&q->lock);
	return mine != NULL;
}

int mbfs_wbq_need_dir(struct mbfs *fs, const char *path)
{
	struct mbfs_wbq *q = fs->wbq;
	struct stat st;
	char top[MB_PATH_MAX];
	if (!q)
		return 0;
	/* the flusher's own last release of a node: its batch ran */
	pthread_mutex_lock(&q->lock);
	bool self = q->running && pthread_equal(q->thread, pthread_self());
	bool removes = q->removes > 0;
	pthread_mutex_unlock(&q->lock);
	bool made = mbfs_newdir_above(fs->newdirs, path, top);
	if (self || (!made && !removes))
		return 0;
	/* flush selects the mkdirs at or above any path and the removals
	 * of it, below it or above it; a failed mkdir leaves the directory
	 * to the guest, which does not have it; one still queued must not
	 * be overtaken */
	int rc = mbfs_wbq_flush(fs, path, 0);
	if (rc == -EAGAIN || (rc && made && fs->sink->shows(fs, top, &st)))
		return -EIO;
	return 0;
}

int mbfs_wbq_need_moved(struct mbfs *fs, const char *path)
{
	struct stat st;
	if (mbfs_newdir_stat(fs->newdirs, path, &st) != 1 ||
	    S_ISDIR(st.st_mode))
		return 0;
	return mbfs_wbq_need_dir(fs, path);
}

bool mbfs_wbq_dir_time(struct mbfs *fs, const char *dir,
		       const struct timespec *mtime)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || strchr(dir, '\n'))
		return false;
	bool pending = false;
	struct mbfs_wbq_entry *mine = NULL;
	pthread_mutex_lock(&fs->nodes_lock);
	pthread_mutex_lock(&q->lock);
	for (struct mbfs_wbq_entry *e = q->head; e; e = e->next) {
		/* a file or a directory made in dir moves its mtime */
		/* (a file's own removal, move or chmod is no directory's) */
		if (e->n ? mbfs_path_selects(q->files->where(e->n), dir,
					      MBFS_BATCH_CHILDREN)
			 : (!mbfs_wbdir_removes(e->kind) &&
			    strcmp(e->dpath, dir) == 0) ||
			   ((e->kind == MBFS_WBDIR_MAKE ||
			     mbfs_wbdir_removes(e->kind)) &&
			    mbfs_path_selects(e->dpath, dir,
					       MBFS_BATCH_CHILDREN)) ||
			   (e->dto && mbfs_path_selects(e->dto, dir,
						       MBFS_BATCH_CHILDREN))) {
			pending = true;
			if (!e->n && e->kind == MBFS_WBDIR_TIME &&
			    !e->inflight)
				mine = e;
		}
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (q->stop || !q->running) {
		pending = false;   /* the caller waits for what is left */
	} else if (mine) {
		mine->dtime = *mtime;
		note(fs, mine);
	} else if (pending) {
		/* behind what is queued or in flight: it lands after them */
		struct mbfs_wbq_entry *e = mbfs_wbq_append_dir_locked(q, dir, MBFS_WBDIR_TIME);
		if (e) {
			e->dtime = *mtime;
			note(fs, e);
		} else {
			pending = false;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return pending;
}

void mbfs_wbq_parent_changes(struct mbfs *fs, const char *path, bool local)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	char *dir = NULL;
	bool again = false;
	pthread_mutex_lock(&q->lock);
	if (!q->dirs) {   /* no time queued: nothing to move */
		pthread_mutex_unlock(&q->lock);
		return;
	}
	struct mbfs_wbq_entry **pp = &q->head;
	while (*pp) {
		struct mbfs_wbq_entry *e = *pp;
		if (e->n || e->kind != MBFS_WBDIR_TIME ||
		    !mbfs_path_selects(e->dpath, path, MBFS_BATCH_PARENT)) {
			pp = &e->next;
			continue;
		}
		if (!dir)
			dir = strdup(e->dpath);
		/* one on its way lands after the change: the newer time
		 * (now) goes behind it */
		if (e->inflight) {
			again = true;
			pp = &e->next;
			continue;
		}
		again = again || local;
		*pp = e->next;
		q->queued--;
		mbfs_wbq_drop_dir_locked(fs, q, e);
	}
	q->tail = pp;
	struct mbfs_wbq_entry *e = again && dir
		? mbfs_wbq_append_dir_locked(q, dir, MBFS_WBDIR_TIME) : NULL;
	if (e) {
		clock_gettime(CLOCK_REALTIME, &e->dtime);
		note(fs, e);
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	free(dir);
}

void mbfs_wbq_apply_dir_time(struct mbfs *fs, const char *path,
			     struct stat *st)
{
	struct mbfs_wbq *q = fs->wbq;
	mode_t mode0 = st->st_mode;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	/* in queue order: the last one is the newest; a file's mode holds
	 * only until the file leaves the name (another may take it) */
	for (const struct mbfs_wbq_entry *e = q->head;
	     e && (q->dirs || q->chmods); e = e->next) {
		if (!e->n && e->kind == MBFS_WBDIR_MV &&
		    (strcmp(e->dpath, path) == 0 || strcmp(e->dto, path) == 0))
			st->st_mode = (st->st_mode & S_IFMT) | (mode0 & 07777);
		if (e->n || strcmp(e->dpath, path) != 0)
			continue;
		if (e->kind == MBFS_WBDIR_RM)
			st->st_mode = (st->st_mode & S_IFMT) | (mode0 & 07777);
		if (e->kind == MBFS_WBDIR_TIME) {
			st->st_mtim = e->dtime;
			st->st_ctim = e->dtime;
		} else if (e->kind == MBFS_WBDIR_MODE ||
			   e->kind == MBFS_WBDIR_CHMOD) {
			st->st_mode = (st->st_mode & S_IFMT) | e->dmode;
		}
	}
	pthread_mutex_unlock(&q->lock);
}

bool mbfs_wbq_remove(struct mbfs *fs, const char *path, bool dir,
		     const struct stat *base)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || !mbfs_wbsend_fits(path))
		return false;
	bool queued = false;
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	struct mbfs_wbq_entry *make = NULL;
	for (struct mbfs_wbq_entry *e = q->head; e && dir; e = e->next) {
		if (!e->n && strcmp(e->dpath, path) == 0)
			make = e->kind == MBFS_WBDIR_MAKE && !e->inflight ? e : NULL;
		/* a move through it after its mkdir needs it made on the
		 * sandbox: then it is made, and removed, in order */
		else if (make && !e->n && e->kind == MBFS_WBDIR_MV &&
			 (mbfs_path_at_or_below(e->dpath, path) ||
			  mbfs_path_at_or_below(e->dto, path)))
			make = NULL;
	}
	if (!q->running || q->stop) {
		/* refused: the caller removes it now */
	} else if (make) {
		/* made here and never sent: nothing to remove there; its
		 * times and mode have nothing to land on either */
		struct mbfs_wbq_entry **pp = &q->head;
		bool after = false;   /* at the MAKE or after it */
		while (*pp) {
			struct mbfs_wbq_entry *e = *pp;
			after = after || e == make;
			if (!after || e->n || e->inflight ||
			    strcmp(e->dpath, path) != 0) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			q->queued--;
			mbfs_wbq_drop_dir_locked(fs, q, e);
		}
		q->tail = pp;
		mbfs_newdir_remove(fs->newdirs, path);
		queued = true;
	} else {
		struct mbfs_wbq_entry *e = mbfs_gone_add(fs->gone, path) ? NULL :
			mbfs_wbq_append_dir_locked(q, path,
						   dir ? MBFS_WBDIR_RMDIR : MBFS_WBDIR_RM);
		if (!e)
			mbfs_gone_remove(fs->gone, path);
		/* a mkdir of it (a move onto it) still on its way: the
		 * view no longer shows it as made here (the removal is
		 * newer), and its landing tells the cache nothing
		 * (wbq_land.c) */
		if (e)
			mbfs_newdir_remove(fs->newdirs, path);
		if (e && base && !dir) {
			e->base_known = true;
			e->base_size = (uint64_t)base->st_size;
			e->base_mtime = base->st_mtim.tv_sec;
		}
		if (e)
			note(fs, e);
		queued = e != NULL;
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return queued;
}


bool mbfs_wbq_move(struct mbfs *fs, const char *from, const char *to,
		   const struct stat *st)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || !mbfs_wbsend_fits(from) || !mbfs_wbsend_fits(to))
		return false;
	struct mbfs_wbq_entry *e = NULL;
	char *dto = strdup(to), id[17], ledger[64];
	/* named (and noted) now, not under the queue's lock: the move's
	 * journal line names it */
	if (mb_random_hex(id, 8) || mbfs_wbsend_ledger(fs, ledger)) {
		free(dto);
		return false;
	}
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	if (dto && q->running && !q->stop &&
	    mbfs_gone_add(fs->gone, from) == 0) {
		e = mbfs_wbq_append_dir_locked(q, from, MBFS_WBDIR_MV);
		if (e) {
			e->dto = dto;
			dto = NULL;
			memcpy(e->mv_id, id, sizeof(id));
		} else {
			mbfs_gone_remove(fs->gone, from);
		}
	}
	free(dto);
	if (e) {
		/* a move onto from still on its way shows it no more; to
		 * shows the file, newer than anything queued for it */
		mbfs_newdir_remove(fs->newdirs, from);
		struct stat now = *st;
		clock_gettime(CLOCK_REALTIME, &now.st_ctim);
		e->shown = mbfs_newdir_add_file(fs->newdirs, to, &now);
		note(fs, e);
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return e != NULL;
}

bool mbfs_wbq_chmod(struct mbfs *fs, const char *path, unsigned perm,
		    const struct stat *base)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q || !mbfs_wbsend_fits(path))
		return false;
	struct mbfs_wbq_entry *e = NULL;
	pthread_mutex_lock(&q->lock);
	mbfs_wbq_start_locked(fs, q);
	if (q->running && !q->stop)
		e = mbfs_wbq_append_dir_locked(q, path, MBFS_WBDIR_CHMOD);
	if (e) {
		e->dmode = perm & 07777;
		e->base_known = true;
		e->base_size = (uint64_t)base->st_size;
		e->base_mtime = base->st_mtim.tv_sec;
		note(fs, e);
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return e != NULL;
}
