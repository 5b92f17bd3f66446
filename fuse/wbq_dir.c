/* wbq_dir.c: the write-back queue's entries of directories (wbq.h):
 * mkdirs queued and shown until they land (newdir.h), modes and times
 * set behind the files queued before them. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/batch.h"
#include "fuse/cache.h"
#include "fuse/mbfs.h"
#include "fuse/newdir.h"
#include "fuse/node_int.h"
#include "fuse/wbq.h"
#include "fuse/wbq_int.h"
#include "fuse/wbsend.h"

static void set_mtime(struct stat *st, const void *arg)
{
	st->st_mtim = *(const struct timespec *)arg;
	st->st_ctim = st->st_mtim;
}

/* The cache learns the directory made (empty: the files of the batch
 * follow) or forgets what it was told, and the guest answers for it from
 * now on (newdir.h). */
void mbfs_wbq_made(struct mbfs *fs, const char *path, int rc, const char *why)
{
	struct stat st;
	if (!rc && mbfs_newdir_stat(fs->newdirs, path, &st) == 1)
		mbfs_cache_put_dir(fs->cache, path, &st);
	else if (rc)
		mb_log(MB_LOG_WARN, "cannot make the directory '%s' on the "
		       "sandbox: %s; the files written in it are kept", path,
		       why);
	mbfs_newdir_remove(fs->newdirs, path);
	if (rc)
		mbfs_cache_invalidate_tree(fs->cache, path);
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
	if (kind != MBFS_WBDIR_MAKE)
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
		if (e)
			e->dmode = st->st_mode & 07777;
		else
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
		    strcmp(e->dpath, path) != 0)
			continue;
		/* the last one of the path, if not on its way yet */
		mine = e->inflight ? NULL : e;
	}
	if (mine && mine->kind == MBFS_WBDIR_MAKE)
		mbfs_newdir_set_perm(fs->newdirs, path, perm);
	if (!mine && q->running && !q->stop)
		mine = mbfs_wbq_append_dir_locked(q, path, MBFS_WBDIR_MODE);
	if (mine)
		mine->dmode = perm & 07777;
	pthread_mutex_unlock(&q->lock);
	return mine != NULL;
}

int mbfs_wbq_need_dir(struct mbfs *fs, const char *path)
{
	struct mbfs_wbq *q = fs->wbq;
	struct stat st;
	char top[MB_PATH_MAX];
	if (!q || !mbfs_newdir_above(fs->newdirs, path, top))
		return 0;
	/* the flusher's own last release of a node: its batch ran */
	pthread_mutex_lock(&q->lock);
	bool self = q->running && pthread_equal(q->thread, pthread_self());
	pthread_mutex_unlock(&q->lock);
	if (self)
		return 0;
	/* flush selects the mkdirs at or above any path; a failure there
	 * leaves the directory to the guest, which does not have it */
	if (mbfs_wbq_flush(fs, path, 0) && mbfs_cache_getattr(fs, top, &st))
		return -EIO;
	return 0;
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
		if (e->n ? mbfs_path_selects(e->n->path, dir,
					      MBFS_BATCH_CHILDREN)
			 : strcmp(e->dpath, dir) == 0 ||
			   (e->kind == MBFS_WBDIR_MAKE &&
			    mbfs_path_selects(e->dpath, dir,
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
	} else if (pending) {
		/* behind what is queued or in flight: it lands after them */
		struct mbfs_wbq_entry *e = mbfs_wbq_append_dir_locked(q, dir, MBFS_WBDIR_TIME);
		if (e)
			e->dtime = *mtime;
		else
			pending = false;
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
		q->dirs--;
		free(e->dpath);
		free(e);
	}
	q->tail = pp;
	struct mbfs_wbq_entry *e = again && dir
		? mbfs_wbq_append_dir_locked(q, dir, MBFS_WBDIR_TIME) : NULL;
	if (e)
		clock_gettime(CLOCK_REALTIME, &e->dtime);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	free(dir);
}

void mbfs_wbq_apply_dir_time(struct mbfs *fs, const char *path,
			     struct stat *st)
{
	struct mbfs_wbq *q = fs->wbq;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	/* in queue order: the last one is the newest */
	for (const struct mbfs_wbq_entry *e = q->head; e && q->dirs; e = e->next) {
		if (e->n || strcmp(e->dpath, path) != 0)
			continue;
		if (e->kind == MBFS_WBDIR_TIME) {
			st->st_mtim = e->dtime;
			st->st_ctim = e->dtime;
		} else if (e->kind == MBFS_WBDIR_MODE) {
			st->st_mode = (st->st_mode & S_IFMT) | e->dmode;
		}
	}
	pthread_mutex_unlock(&q->lock);
}

void mbfs_wbq_dir_landed(struct mbfs *fs, const struct mbfs_wbdir *d)
{
	/* the files' renames moved the directory's mtime, then the batch
	 * set it: what the cache assumed after the files is wrong */
	if (d->kind == MBFS_WBDIR_TIME)
		mbfs_cache_modify(fs->cache, d->path, set_mtime, &d->mtime);
	else if (d->kind == MBFS_WBDIR_MODE)
		mbfs_cache_set_perm(fs->cache, d->path, d->mode);
}
