/* bulk.c: large stdout through 1 MiB GETs in parallel (see bulk.h).
 *
 * One round covers the whole MiB waiting when it starts. PARALLEL workers
 * share it: one of them cuts the next PIECES_PER_CUT pieces on the guest
 * while the others fetch pieces already cut, so the guest's pass over the
 * data overlaps the transfers instead of preceding them. The caller's
 * thread writes pieces out in order as they arrive; at most RING pieces
 * are held in memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/api.h"
#include "common/log.h"
#include "shim/bulk.h"
#include "shim/guest.h"

/* A cut is an exec, and an exec costs tens of ms besides the copy: cut
 * few pieces first, so the GETs start early, then many at a time, soon
 * enough that the GETs never catch up with the cutting. */
#define FIRST_CUT 4u
#define PIECES_PER_CUT 32u
#define CUT_AHEAD 24u      /* cut again when fewer pieces than this wait */
#define PARALLEL 4u        /* the sandbox runs 4 operations at once */
#define RING 8u            /* pieces fetched ahead of the writer */

enum piece_state { P_EMPTY, P_FETCHING, P_READY };

struct piece {
	struct mb_buf data;
	enum piece_state state;
};

struct round {
	struct mbx_run *r;
	struct mbx_exec_state *st;
	uint64_t base;          /* stream offset of piece 0 */
	unsigned total;         /* whole pieces in this round */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* protected by mu: */
	unsigned cut;           /* pieces below this exist on the guest */
	unsigned next;          /* next piece to fetch */
	unsigned written;       /* pieces written out */
	bool cutting;
	bool stop;
	int e;                  /* first error, -errno */
	struct piece ring[RING];  /* piece k lives in ring[k % RING] */
};

static int cut(struct round *o, unsigned first, unsigned n, unsigned keep)
{
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;
	char keeps[16];
	int e;

	if (first == 0)
		snprintf(keeps, sizeof(keeps), "all");
	else
		snprintf(keeps, sizeof(keeps), "%u", keep);
	mb_buf_init(&b, 256u * 1024);
	e = mbx_guest_cut(&b, o->st->run_id,
			  o->base + (uint64_t)first * MBX_PIECE_BYTES, n, first, keeps);
	if (!e)
		e = mbx_guest_call(o->r, &b, MBX_POLL_TIMEOUT_MS, true, &rep, NULL, &err);
	mb_buf_release(&b);
	if (e) {
		mb_log(MB_LOG_DEBUG, "bulk output: cannot cut pieces (%s)", strerror(-e));
		return e;
	}
	e = rep.state == MBX_ST_OTHER ? 0 : -EPROTO;
	mbx_report_release(&rep);
	return e;
}

static int get(struct round *o, unsigned k, struct mb_buf *data)
{
	char path[96];
	struct mb_err err;
	int e;

	snprintf(path, sizeof(path), "%s/piece.%06u", o->st->run_dir, k);
	mb_err_clear(&err);
	e = mb_file_get(o->r->client, &o->r->ident, path, data, &err);
	if (!e && data->len != MBX_PIECE_BYTES)
		e = mb_err_set(&err, EPROTO, "a piece of output has %zu bytes, "
			       "not %u", data->len, MBX_PIECE_BYTES);
	if (e)
		mb_log(MB_LOG_DEBUG, "bulk output: %s", err.msg);
	return e;
}

/* A worker: cut when the cut pieces run low, else fetch the next one the
 * ring has room for, until the round is done or stopped. */
static void *work_main(void *arg)
{
	struct round *o = arg;
	unsigned first, n, keep, k;
	struct piece *p;
	int e;

	pthread_mutex_lock(&o->mu);
	while (!o->stop && !o->e && o->next < o->total) {
		if (!o->cutting && o->cut < o->total && o->cut - o->next < CUT_AHEAD) {
			o->cutting = true;
			first = o->cut;
			n = first ? PIECES_PER_CUT : FIRST_CUT;
			if (n > o->total - first)
				n = o->total - first;
			keep = o->written;
			pthread_mutex_unlock(&o->mu);
			e = cut(o, first, n, keep);
			pthread_mutex_lock(&o->mu);
			o->cutting = false;
			if (e && !o->e)
				o->e = e;
			if (!e)
				o->cut += n;
			pthread_cond_broadcast(&o->cv);
			continue;
		}
		if (o->next < o->cut && o->next < o->written + RING) {
			k = o->next++;
			p = &o->ring[k % RING];
			p->state = P_FETCHING;
			pthread_mutex_unlock(&o->mu);
			e = get(o, k, &p->data);
			pthread_mutex_lock(&o->mu);
			if (e && !o->e)
				o->e = e;
			p->state = P_READY;
			pthread_cond_broadcast(&o->cv);
			continue;
		}
		pthread_cond_wait(&o->cv, &o->mu);
	}
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* The caller's thread: write pieces out in order as they arrive. */
static void write_out(struct round *o)
{
	struct piece *p;
	unsigned k;
	int d;

	pthread_mutex_lock(&o->mu);
	while (o->written < o->total && !o->e) {
		k = o->written;
		p = &o->ring[k % RING];
		if (p->state != P_READY || k >= o->next) {
			pthread_cond_wait(&o->cv, &o->mu);
			continue;
		}
		pthread_mutex_unlock(&o->mu);
		d = mbx_deliver(o->r, &o->r->out, &o->st->out_off,
				o->base + (uint64_t)k * MBX_PIECE_BYTES,
				(const unsigned char *)p->data.data, p->data.len);
		mb_buf_reset(&p->data);
		pthread_mutex_lock(&o->mu);
		p->state = P_EMPTY;
		o->written++;
		if (d == -EPIPE) {
			o->st->broken_pipe = true;
			o->stop = true;
		}
		pthread_cond_broadcast(&o->cv);
	}
	o->stop = true;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

int mbx_bulk_fetch(struct mbx_run *r, struct mbx_exec_state *st)
{
	uint64_t pending = st->out_size - st->out_off;
	pthread_t th[PARALLEL];
	bool started[PARALLEL];
	struct round o;
	unsigned i, n, written;
	int e;

	if (pending < MBX_BULK_MIN)
		return -EAGAIN;
	memset(&o, 0, sizeof(o));
	o.r = r;
	o.st = st;
	o.base = st->out_off;
	o.total = (unsigned)(pending / MBX_PIECE_BYTES);
	pthread_mutex_init(&o.mu, NULL);
	pthread_cond_init(&o.cv, NULL);
	for (i = 0; i < RING; i++)
		mb_buf_init(&o.ring[i].data, MBX_PIECE_BYTES);
	for (i = 0, n = 0; i < PARALLEL; i++)
		n += started[i] = pthread_create(&th[i], NULL, work_main, &o) == 0;
	if (n)
		write_out(&o);
	else
		o.e = -EAGAIN;   /* no thread at all: polls will do */
	for (i = 0; i < PARALLEL; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	for (i = 0; i < RING; i++)
		mb_buf_release(&o.ring[i].data);
	pthread_mutex_destroy(&o.mu);
	pthread_cond_destroy(&o.cv);
	e = o.e;
	written = o.written;
	/* what was written counts even when a later piece failed */
	return written ? 0 : (e ? e : -EAGAIN);
}
