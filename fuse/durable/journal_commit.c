/* journal_commit.c: what a close() waits for (journal.h,
 * mbfs_journal_commit): its own file synced by itself; the run directory
 * and the outbox log, when a line was written to it, synced once for the
 * callers of a moment (group commit). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/durable/journal.h"
#include "fuse/durable/journal_int.h"

void mbfs_journal_commit_init(struct mbfs_journal *j)
{
	pthread_mutex_init(&j->clock, NULL);
	pthread_cond_init(&j->cdone, NULL);
}

void mbfs_journal_commit_destroy(struct mbfs_journal *j)
{
	pthread_mutex_destroy(&j->clock);
	pthread_cond_destroy(&j->cdone);
}

static void failed(struct mbfs_journal *j, const char *what, int rc)
{
	pthread_mutex_lock(&j->clock);
	bool first = !j->c_failed;
	j->c_failed = true;
	pthread_mutex_unlock(&j->clock);
	if (first)
		mb_log(MB_LOG_WARN, "cannot make %s in '%s' durable: %s; "
		       "closes say so (EIO)", what, j->run, strerror(-rc));
}

/* The shared part: the run directory (new copies, records in files of
 * their own, renames) and the outbox log. */
static int sync_shared(struct mbfs_journal *j)
{
	pthread_mutex_lock(&j->oplock);
	int opfd = j->opfd;   /* open until the journal closes */
	pthread_mutex_unlock(&j->oplock);
	int rc = fsync(j->runfd) ? -errno : 0;
	if (!rc && opfd >= 0 && fdatasync(opfd))
		rc = -errno;
	/* a file system that offers no sync of these (EINVAL) keeps
	 * nothing more for being asked again: no failure of ours */
	return rc == -EINVAL ? 0 : rc;
}

void mbfs_journal_commit_dirty(struct mbfs_journal *j)
{
	pthread_mutex_lock(&j->clock);
	j->c_gen++;
	pthread_mutex_unlock(&j->clock);
}

int mbfs_journal_commit(struct mbfs_journal *j, int fd)
{
	if (!j)
		return 0;
	pthread_mutex_lock(&j->clock);
	j->c_entered++;
	pthread_mutex_unlock(&j->clock);
	/* the caller's file: its data, its record (an attribute of it) and,
	 * on a journaling file system, its name, committed in the same
	 * transaction or an earlier one. An fsync of one file waits for
	 * that file, not for every dirty page of the disk as a syncfs
	 * would (a download next to the cache would hold each close for
	 * seconds); the file system joins the fsyncs of a moment in one
	 * commit of its own. */
	int rc = fd >= 0 && fsync(fd) ? -errno : 0;
	if (rc == -EINVAL)   /* no sync offered here (as above) */
		rc = 0;
	if (rc)
		failed(j, "a working copy", rc);
	pthread_mutex_lock(&j->clock);
	/* a sync that began before this point may have missed the
	 * caller's lines: only one that begins later covers its ticket */
	uint64_t ticket = ++j->c_asked;
	while (j->c_done < ticket) {
		if (j->c_running) {
			pthread_cond_wait(&j->cdone, &j->clock);
			continue;
		}
		/* this caller syncs for every ticket given so far, when an
		 * outbox line was written since the last sync began: in a
		 * storm of new files (tar x) most closes have none */
		uint64_t upto = j->c_asked, gen = j->c_gen;
		bool need = gen != j->c_gen_synced;
		j->c_running = true;
		pthread_mutex_unlock(&j->clock);
		int r = need ? sync_shared(j) : 0;
		if (r)
			failed(j, "the journal's names or log", r);
		pthread_mutex_lock(&j->clock);
		j->c_running = false;
		if (r) {   /* the tickets it covered, with any failed before
			    * (a close between two failures hears EIO too:
			    * more than needed, never less) */
			if (!j->c_bad_hi)
				j->c_bad_lo = j->c_done + 1;
			j->c_bad_hi = upto;
		} else {
			j->c_gen_synced = gen;
		}
		j->c_done = upto;
		j->c_syncs += need;
		pthread_cond_broadcast(&j->cdone);
	}
	if (ticket >= j->c_bad_lo && ticket <= j->c_bad_hi)
		rc = -EIO;
	j->c_left++;
	pthread_mutex_unlock(&j->clock);
	return rc ? -EIO : 0;
}

void mbfs_journal_commits(struct mbfs_journal *j, uint64_t *entered,
			  uint64_t *left, uint64_t *syncs)
{
	*entered = *left = *syncs = 0;
	if (!j)
		return;
	pthread_mutex_lock(&j->clock);
	*entered = j->c_entered;
	*left = j->c_left;
	*syncs = j->c_syncs;
	pthread_mutex_unlock(&j->clock);
}
