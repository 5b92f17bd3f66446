/* xfer.c: what the transfers share (xfer_int.h): the worker pool and the
 * guest directories they note. Downloads of whole files are xfer_get.c
 * (the pieces of large ones are cut and fetched in xfer_pieces.c, a
 * reader's fetch goes on in xfer_ahead.c), uploads xfer_up.c. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"

/* ---- a small pool running fn(ud, i) for i in [0, n) ---- */

struct par {
	int (*fn)(void *ud, size_t i);
	void *ud;
	size_t n;
	atomic_size_t next;
	atomic_int rc;
	uint64_t deadline;   /* the caller's operation deadline (bound.c) */
};

static void *par_worker(void *arg)
{
	struct par *p = arg;
	mb_op_deadline(p->deadline);   /* the caller's own: it sets it back */
	while (!atomic_load(&p->rc)) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n)
			break;
		int rc = p->fn(p->ud, i);
		int zero = 0;
		if (rc)
			atomic_compare_exchange_strong(&p->rc, &zero, rc);
	}
	return NULL;
}

int mbfs_xfer_parallel(size_t n, int (*fn)(void *, size_t), void *ud)
{
	struct par p = { .fn = fn, .ud = ud, .n = n, .deadline = mb_op_current() };
	atomic_init(&p.next, 0);
	atomic_init(&p.rc, 0);
	pthread_t t[MBFS_XFER_THREADS];
	size_t started = 0;
	for (size_t k = 1; k < MBFS_XFER_THREADS && k < n; k++)
		if (pthread_create(&t[started], NULL, par_worker, &p) == 0)
			started++;
	par_worker(&p);
	for (size_t k = 0; k < started; k++)
		pthread_join(t[k], NULL);
	return atomic_load(&p.rc);
}

int mbfs_xfer_remove_dir(struct mbfs *fs, const char *rdir)
{
	struct mb_err e;
	mb_err_clear(&e);
	int rc = mb_fs_remove(fs->client, &fs->ident, rdir, true, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		mb_log(MB_LOG_WARN, "cannot remove '%s' on the guest: %s", rdir, e.msg);
	return rc;
}

unsigned mbfs_xfer_note_dir(struct mbfs *fs, const char *rdir)
{
	unsigned id = 0;
	const char *paths[] = { rdir };
	if (!fs->journal || mbfs_journal_stage(fs->journal, paths, 1, &id))
		return 0;
	return id;
}

void mbfs_xfer_dir_gone(struct mbfs *fs, unsigned note)
{
	if (note && fs->journal)
		mbfs_journal_unstage(fs->journal, note);
}

void mbfs_xfer_remove_noted(struct mbfs *fs, const char *rdir, unsigned note)
{
	/* a sandbox that is gone (stopped) takes its /tmp along */
	bool gone = atomic_load(&fs->stopped) ||
		    mbfs_xfer_remove_dir(fs, rdir) == 0;
	if (!note || !fs->journal)
		return;
	if (gone)
		mbfs_journal_unstage(fs->journal, note);
	else
		mbfs_journal_leftover(fs->journal, note);
}
