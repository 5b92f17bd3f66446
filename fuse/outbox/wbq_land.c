/* wbq_land.c: what the write-back queue does once a batch has carried
 * an entry that is not a file (wbq_int.h): a mkdir made or failed, a
 * directory's time or mode set, a removal or a move done or refused, and
 * the entry leaving the queue and the journal's outbox log. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "fuse/outbox/gone.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/newdir.h"
#include "fuse/outbox/sink.h"
#include "fuse/outbox/wbq_int.h"
#include "fuse/outbox/wbsend.h"

/* The cache learns the directory made (empty: the files of the batch
 * follow) or forgets what it was told, and the guest answers for it from
 * now on (newdir.h). */
/* Is a later mkdir of path still queued (made, removed and made again
 * here)? Then the table's entry for path is that one's. */
static bool made_again(struct mbfs_wbq *q, const char *path)
{
	bool again = false;
	pthread_mutex_lock(&q->lock);
	for (const struct mbfs_wbq_entry *e = q->head; e && !again; e = e->next)
		again = !e->n && !e->inflight && e->kind == MBFS_WBDIR_MAKE &&
			strcmp(e->dpath, path) == 0;
	pthread_mutex_unlock(&q->lock);
	return again;
}

void mbfs_wbq_made(struct mbfs *fs, const char *path, int rc, const char *why)
{
	struct stat st;
	if (made_again(fs->wbq, path)) {
		/* its removal and the new mkdir follow: what the mount shows
		 * is the new one's */
		if (rc)
			mb_log(MB_LOG_WARN, "cannot make the directory '%s' on "
			       "the sandbox: %s", path, why);
		return;
	}
	/* a file moved to the name since (the directory removed here
	 * again) owns the table's entry: its move lands later */
	bool mine = mbfs_newdir_stat(fs->newdirs, path, &st) == 1 &&
		    S_ISDIR(st.st_mode);
	if (!rc && mine)
		fs->sink->landed(fs, path, &st, true);
	else if (rc)
		mb_log(MB_LOG_WARN, "cannot make the directory '%s' on the "
		       "sandbox: %s; the files written in it are kept", path,
		       why);
	if (mine)
		mbfs_newdir_remove(fs->newdirs, path);
	if (rc)
		fs->sink->unsure(fs, path, true);
}

void mbfs_wbq_drop_dir_locked(struct mbfs *fs, struct mbfs_wbq *q,
			      struct mbfs_wbq_entry *e)
{
	if (mbfs_wbdir_removes(e->kind)) {
		q->removes--;
		if (!e->landed && e->kind != MBFS_WBDIR_CHMOD)
			mbfs_gone_remove(fs->gone, e->dpath);
		if (e->kind == MBFS_WBDIR_CHMOD)
			q->chmods--;
		if (!e->landed)
			mbfs_newdir_remove_id(fs->newdirs, e->shown, NULL);
	}
	else if (e->kind != MBFS_WBDIR_MAKE)
		q->dirs--;
	mbfs_journal_op_done(fs->journal, e->jid);
	free(e->dpath);
	free(e->dto);
	free(e);
}

void mbfs_wbq_moved(struct mbfs *fs, struct mbfs_wbq_entry *e,
		    const struct mbfs_wbdir *d)
{
	struct stat st;
	bool shown = mbfs_newdir_remove_id(fs->newdirs, e->shown, &st);
	e->shown = 0;
	if (!d->rc && d->one_file) {
		/* hard links: rename(2) leaves both names */
		fs->sink->unsure(fs, d->path, false);
		fs->sink->unsure(fs, d->to, false);
		return;
	}
	if (!d->rc) {
		/* a listing the cache took from the sandbox meanwhile still
		 * had from and not to (the view showed them as moved) */
		fs->sink->removed(fs, d->path, false);
		if (shown)
			fs->sink->landed(fs, d->to, &st, false);
		return;
	}
	mb_log(MB_LOG_WARN, "the sandbox refused to rename '%s' to '%s': %s; "
	       "both show as they are there", d->path, d->to,
	       d->why);
	fs->sink->unsure(fs, d->path, true);
	fs->sink->unsure(fs, d->to, true);
}

void mbfs_wbq_dir_landed(struct mbfs *fs, const struct mbfs_wbdir *d)
{
	if (d->kind == MBFS_WBDIR_CHMOD) {
		/* done: a stat taken meanwhile (a time set) had the old
		 * mode; a refusal shows the sandbox's again */
		if (!d->rc)
			fs->sink->set_perm(fs, d->path, d->mode);
		if (d->rc) {
			mb_log(MB_LOG_WARN, "the sandbox refused to change the "
			       "mode of '%s': %s", d->path, d->why);
			fs->sink->unsure(fs, d->path, false);
		}
		return;
	}
	if (mbfs_wbdir_removes(d->kind)) {
		/* gone there now: a listing the cache took from the sandbox
		 * meanwhile still had it (the view hid it until now) */
		if (!d->rc)
			fs->sink->removed(fs, d->path,
					  d->kind == MBFS_WBDIR_RMDIR);
		/* the sandbox kept it: show it as it is there, and say so */
		if (d->rc) {
			mb_log(MB_LOG_WARN, "the sandbox refused to remove '%s': "
			       "%s; it is still there", d->path, d->why);
			fs->sink->unsure(fs, d->path, true);
		}
		return;
	}

	/* the files' renames moved the directory's mtime, then the batch
	 * set it: what the cache assumed after the files is wrong */
	if (d->kind == MBFS_WBDIR_TIME)
		fs->sink->set_mtime(fs, d->path, &d->mtime);
	else if (d->kind == MBFS_WBDIR_MODE)
		fs->sink->set_perm(fs, d->path, d->mode);
}
