/* bulk.c: large stdout through 1 MiB GETs in parallel (see bulk.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/api.h"
#include "common/log.h"
#include "shim/bulk.h"
#include "shim/guest.h"

#define PIECES_PER_CUT 16u
#define PARALLEL 4u   /* the sandbox runs 4 operations at once */

struct piece {
	struct mbx_run *r;
	char path[96];
	struct mb_buf data;
	struct mb_err err;
	int e;
	pthread_t th;
	bool started;
};

static void *get_main(void *arg)
{
	struct piece *p = arg;

	mb_err_clear(&p->err);
	p->e = mb_file_get(p->r->client, &p->r->ident, p->path, &p->data, &p->err);
	if (!p->e && p->data.len != MBX_PIECE_BYTES)
		p->e = mb_err_set(&p->err, EPROTO, "a piece of output has %zu bytes, "
				  "not %u", p->data.len, MBX_PIECE_BYTES);
	return NULL;
}

static int cut(struct mbx_run *r, struct mbx_exec_state *st, unsigned n)
{
	struct mbx_report rep;
	struct mb_err err;
	struct mb_buf b;
	int e;

	mb_buf_init(&b, 256u * 1024);
	e = mbx_guest_cut(&b, st->run_id, st->out_off, n);
	if (!e)
		e = mbx_guest_call(r, &b, MBX_POLL_TIMEOUT_MS, true, &rep, NULL, &err);
	mb_buf_release(&b);
	if (e)
		return e;
	e = rep.state == MBX_ST_OTHER ? 0 : -EPROTO;
	mbx_report_release(&rep);
	return e;
}

int mbx_bulk_fetch(struct mbx_run *r, struct mbx_exec_state *st)
{
	uint64_t pending = st->out_size - st->out_off, base = st->out_off;
	unsigned n = (unsigned)(pending / MBX_PIECE_BYTES), i, k;
	struct piece p[PARALLEL];
	int e = 0;

	if (n > PIECES_PER_CUT)
		n = PIECES_PER_CUT;
	if (pending < MBX_BULK_MIN || n == 0)
		return -EAGAIN;
	e = cut(r, st, n);
	if (e) {
		mb_log(MB_LOG_DEBUG, "bulk output: cannot cut pieces (%s)", strerror(-e));
		return e;
	}
	for (i = 0; i < n && !e && !st->broken_pipe; i += PARALLEL) {
		unsigned w = n - i < PARALLEL ? n - i : PARALLEL;

		for (k = 0; k < w; k++) {
			memset(&p[k], 0, sizeof(p[k]));
			p[k].r = r;
			snprintf(p[k].path, sizeof(p[k].path), "%s/piece.%04u",
				 st->run_dir, i + k);
			mb_buf_init(&p[k].data, MBX_PIECE_BYTES);
			p[k].started = pthread_create(&p[k].th, NULL, get_main, &p[k]) == 0;
			if (!p[k].started)
				get_main(&p[k]);
		}
		for (k = 0; k < w; k++) {
			if (p[k].started)
				pthread_join(p[k].th, NULL);
			if (!e && p[k].e) {
				e = p[k].e;
				mb_log(MB_LOG_DEBUG, "bulk output: %s", p[k].err.msg);
			}
			if (!e && mbx_deliver(r, &r->out, &st->out_off,
					      base + (uint64_t)(i + k) * MBX_PIECE_BYTES,
					      (const unsigned char *)p[k].data.data,
					      p[k].data.len) == -EPIPE)
				st->broken_pipe = true;
			mb_buf_release(&p[k].data);
		}
	}
	return e;
}
