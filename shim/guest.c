/* guest.c: build the exec strategy's guest ops from the scripts in
 * shim/guest/ (embedded at build time); parse their reports.
 *
 * Every op is one exec of a clean shell (mb_exec_clean, exec_aux.c): `B=...
 * V=... R=...`, positional arguments (`set -- ...`), lib.sh, then the op's
 * script. The launch also
 * installs sup.sh and run.sh as $B/sup-$V.sh and $B/run-$V.sh when they are
 * missing. Why the guest process tree looks as it does (a long-lived
 * supervisor that starts and reaps every run) is in shim/guest/sup.sh.
 * Nothing here does I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "shim/guest.h"
#include "shim/guest_sh.h"
#include "shim/result.h"

int mbx_sh_assign(struct mb_buf *b, const char *var, const char *value)
{
	char *b64 = NULL;
	size_t n;
	int r;

	if (mb_utf8_valid(value, strlen(value))) {
		r = mb_buf_appendf(b, "%s=", var);
		r = r ? r : mb_buf_append_shq(b, value);
		return r ? r : mb_buf_appends(b, "\n");
	}
	/* the exec body is JSON, so UTF-8 only: other bytes travel as base64
	 * (the trailing x keeps trailing newlines through $(...)) */
	r = mb_base64_encode(value, strlen(value), &b64, &n);
	r = r ? r : mb_buf_appendf(b, "%s=$(printf %%s '%s' | base64 -d; echo x); "
				   "%s=${%s%%x}\n", var, b64, var, var);
	free(b64);
	return r;
}

/* B, V (and K: $MBEXEC_KEEP_SECONDS, for tests, sets how long a supervisor
 * started by this op keeps finished runs), then lib.sh: the same for every
 * run, so a mount's shared poll sends it once. */
static int prelude(struct mb_buf *b)
{
	const char *keep = getenv("MBEXEC_KEEP_SECONDS");
	uint64_t k = 0;
	int r = mb_buf_appendf(b, "B=%s V=%s\n", MBX_RUN_BASE, mbx_sh_version);

	if (!r && keep && mb_parse_u64(keep, 2, 86400, &k) == 0)
		r = mb_buf_appendf(b, "K=%llu\n", (unsigned long long)k);
	return r ? r : mb_buf_appends(b, mbx_sh_lib);
}

/* The variables every op needs, then lib.sh. */
static int head(struct mb_buf *b, const char *run_id)
{
	int r = prelude(b);

	return r ? r : mb_buf_appendf(b, "R=%s/%s\n", MBX_RUN_BASE, run_id);
}

/* Install one script under $B when missing (write, then rename). */
static int install(struct mb_buf *b, const char *name, const char *text)
{
	int r = mb_buf_appendf(b, "[ -f \"$B/%s-$V.sh\" ] || { printf %%s ", name);

	r = r ? r : mb_buf_append_shq(b, text);
	return r ? r : mb_buf_appendf(b, " >\"$B/.%s-$V.$$\" && "
				      "mv -f \"$B/.%s-$V.$$\" \"$B/%s-$V.sh\"; }\n",
				      name, name, name);
}

static const char *in_mode_name(enum mbx_in_mode m)
{
	switch (m) {
	case MBX_IN_EMBED:
		return "embed";
	case MBX_IN_STREAM:
		return "stream";
	case MBX_IN_PTY:
		return "pty";
	default:
		return "none";
	}
}

int mbx_guest_launch(struct mb_buf *b, const struct mbx_launch *l)
{
	char *b64 = NULL;
	size_t b64len;
	int r = head(b, l->run_id);

	r = r ? r : mb_buf_appends(b, "base_make || { echo '@mbx fail base'; exit 0; }\n");
	r = r ? r : install(b, "sup", mbx_sh_sup);
	r = r ? r : install(b, "run", mbx_sh_run);
	r = r ? r : mbx_sh_assign(b, "C", l->cwd);
	if (l->script) {
		r = r ? r : mbx_sh_assign(b, "S", l->script);
	} else {
		r = r ? r : mbx_sh_assign(b, "SF", l->script_path);
	}
	/* as ssh's pty-req: the local TERM, none when it is unset or empty */
	if (!r && l->in_mode == MBX_IN_PTY && l->term && *l->term)
		r = mbx_sh_assign(b, "T", l->term);
	if (!r && l->in_mode == MBX_IN_EMBED) {
		r = mb_base64_encode(l->in_data, l->in_len, &b64, &b64len);
		r = r ? r : mb_buf_appendf(b, "IN='%s'\n", b64 ? b64 : "");
	}
	r = r ? r : mb_buf_appendf(b, "set -- %u.%03u %s %u %u %u %u %s\n",
				   l->wait_ms / 1000, l->wait_ms % 1000,
				   in_mode_name(l->in_mode), l->guard_s,
				   l->orphan_s >= 4 ? l->orphan_s : 4,
				   l->cols ? l->cols : 80, l->rows ? l->rows : 24,
				   l->no_wait_output ? "nowait" : "wait");
	r = r ? r : mb_buf_appends(b, mbx_sh_launch);
	free(b64);
	return r;
}

int mbx_guest_poll(struct mb_buf *b, const char *run_id, uint64_t oo,
		   uint64_t eo, long in_pos, unsigned wait_ms, bool record)
{
	int r = head(b, run_id);

	r = r ? r : mb_buf_appendf(b, "set -- %llu %llu %ld %u.%03u %u %d\n",
				   (unsigned long long)oo, (unsigned long long)eo,
				   in_pos, wait_ms / 1000, wait_ms % 1000,
				   2 * wait_ms / 50 + 1, record ? 1 : 0);
	return r ? r : mb_buf_appends(b, mbx_sh_poll);
}

int mbx_guest_mux_poll(const char *run_id, uint64_t oo, uint64_t eo,
		       long in_pos, struct mbx_mux_parts *p)
{
	char R[64];
	int r;

	snprintf(R, sizeof(R), "%s/%s", MBX_RUN_BASE, run_id);
	mb_buf_init(&p->prelude, 256u * 1024);
	mb_buf_init(&p->setup, 4096);
	mb_buf_init(&p->ready, 4096);
	mb_buf_init(&p->body, 4096);
	r = prelude(&p->prelude);
	r = r ? r : mb_buf_appendf(&p->setup, "poll_setup %s %llu %llu %ld 1", R,
				   (unsigned long long)oo, (unsigned long long)eo,
				   in_pos);
	r = r ? r : mb_buf_appendf(&p->ready, "poll_ready %s %ld", R, in_pos);
	r = r ? r : mb_buf_appendf(&p->body, "R=%s\nrep %llu %llu", R,
				   (unsigned long long)oo, (unsigned long long)eo);
	if (r)
		mbx_mux_parts_release(p);
	return r;
}

void mbx_mux_parts_release(struct mbx_mux_parts *p)
{
	mb_buf_release(&p->prelude);
	mb_buf_release(&p->setup);
	mb_buf_release(&p->ready);
	mb_buf_release(&p->body);
}

int mbx_guest_attach(struct mb_buf *b, const char *run_id)
{
	int r = head(b, run_id);

	r = r ? r : mb_buf_appends(b, "set -- seen seen -1 0 1 0\n");
	return r ? r : mb_buf_appends(b, mbx_sh_poll);
}

int mbx_guest_signal(struct mb_buf *b, const char *run_id, const char *how)
{
	int r = head(b, run_id);

	r = r ? r : mb_buf_appendf(b, "set -- %s\n", strcmp(how, "INT") ? "TERM" : "INT");
	return r ? r : mb_buf_appends(b, mbx_sh_signal);
}

int mbx_guest_resize(struct mb_buf *b, const char *run_id, unsigned cols,
		     unsigned rows)
{
	int r = head(b, run_id);

	r = r ? r : mb_buf_appendf(b, "set -- %u %u\n", cols, rows);
	return r ? r : mb_buf_appends(b, mbx_sh_resize);
}

int mbx_guest_cut(struct mb_buf *b, const char *run_id, uint64_t off,
		  unsigned n, unsigned first, const char *keep)
{
	int r = head(b, run_id);

	r = r ? r : mb_buf_appendf(b, "set -- %llu %u %u ", (unsigned long long)off,
				   n, first);
	r = r ? r : mb_buf_append_shq(b, keep);
	r = r ? r : mb_buf_appends(b, "\n");
	return r ? r : mb_buf_appends(b, mbx_sh_cut);
}

int mbx_guest_heartbeat(struct mb_buf *b, const char *run_id)
{
	int r = head(b, run_id);

	return r ? r : mb_buf_appends(b, mbx_sh_heartbeat);
}

int mbx_guest_cleanup(struct mb_buf *b, const char *run_id)
{
	int r = head(b, run_id);

	return r ? r : mb_buf_appends(b, mbx_sh_cleanup);
}

/* ---- reports ---- */

void mbx_report_release(struct mbx_report *rep)
{
	free(rep->out_data);
	free(rep->err_data);
	memset(rep, 0, sizeof(*rep));
}

/* The last line starting with "@mbx " (profiles may print before us). */
static const char *find_header(const char *text, size_t len)
{
	const char *p, *last = NULL;

	for (p = text; p && p < text + len; ) {
		if ((size_t)(text + len - p) >= 5 && !memcmp(p, "@mbx ", 5))
			last = p;
		p = memchr(p, '\n', (size_t)(text + len - p));
		if (p)
			p++;
	}
	return last;
}

/* Decode the base64 between from and to (exclusive) into *out. */
static int decode(const char *from, const char *to, unsigned char **out,
		  size_t *n)
{
	*out = NULL;
	*n = 0;
	if (to <= from)
		return 0;
	return mb_base64_decode(from, (size_t)(to - from), out, n);
}

/* A decimal number of at most INT64_MAX, the whole of s. */
static int number(const char *s, unsigned long long *out)
{
	unsigned long long v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' ||
		    v > (0x7fffffffffffffffull - (unsigned)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
	}
	*out = v;
	return 0;
}

int mbx_report_parse(const char *text, size_t len, struct mbx_report *rep)
{
	unsigned long long num[7];
	const char *h, *eol, *e, *end;
	char line[256], *tok[11], *save = NULL;
	int n = 0;

	memset(rep, 0, sizeof(*rep));
	h = find_header(text, len);
	if (!h)
		return -EPROTO;
	eol = memchr(h, '\n', (size_t)(text + len - h));
	if (!eol)
		eol = text + len;
	/* the header line alone, in words: "@mbx STATE ..." */
	if ((size_t)(eol - h) >= sizeof(line))
		return -EPROTO;
	memcpy(line, h, (size_t)(eol - h));
	line[eol - h] = '\0';
	for (char *w = strtok_r(line, " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		if (n == 11)
			return -EPROTO;
		tok[n++] = w;
	}
	if (n < 2)
		return -EPROTO;
	const char *st = tok[1];
	if (!strcmp(st, "gone") || !strcmp(st, "lost") || !strcmp(st, "nocwd") ||
	    !strcmp(st, "ack")) {
		rep->state = st[0] == 'g' ? MBX_ST_GONE : st[0] == 'l' ? MBX_ST_LOST :
			     st[0] == 'n' ? MBX_ST_NOCWD : MBX_ST_OTHER;
		return 0;
	}
	if (!strcmp(st, "fail")) {
		rep->state = MBX_ST_FAIL;
		snprintf(rep->fail, sizeof(rep->fail), "%s",
			 n > 2 ? tok[2] : "unknown");
		return 0;
	}
	/* "@mbx STATE RC OUTSIZE ERRSIZE INPOS OO ON EO EN" */
	if ((strcmp(st, "running") && strcmp(st, "done")) || n != 10)
		return -EPROTO;
	for (int i = 0; i < 7; i++)
		if (number(tok[3 + i], &num[i]))
			return -EPROTO;
	rep->state = st[0] == 'd' ? MBX_ST_DONE : MBX_ST_RUNNING;
	if (rep->state == MBX_ST_DONE) {
		unsigned long long v;

		if (number(tok[2], &v) || v > 255)
			return -EPROTO;
		rep->rc = (int)v;
	}
	unsigned long long os = num[0], es = num[1], oo = num[3], on = num[4],
			   eo = num[5], en = num[6];
	long ip = (long)num[2];
	rep->out_size = os;
	rep->err_size = es;
	rep->in_pos = ip;
	rep->out_off = oo;
	rep->err_off = eo;
	/* out data up to "\n@e\n", err data up to "\n@end" */
	e = eol;
	while (e < text + len && !((size_t)(text + len - e) >= 4 &&
				   !memcmp(e, "\n@e\n", 4)))
		e++;
	if (e >= text + len)
		return -EPROTO;
	end = e + 1;
	while (end < text + len && !((size_t)(text + len - end) >= 5 &&
				     !memcmp(end, "\n@end", 5)))
		end++;
	if (end >= text + len)
		return -EPROTO;
	if (decode(eol, e, &rep->out_data, &rep->out_len) ||
	    decode(e + 4, end, &rep->err_data, &rep->err_len) ||
	    rep->out_len != on || rep->err_len != en) {
		mbx_report_release(rep);
		return -EPROTO;
	}
	rep->complete = rep->state == MBX_ST_DONE && oo + on == os && eo + en == es;
	return 0;
}
