/* touch.c: setting file times on the guest (touch.h): the items of a send
 * become the arguments of fuse/guest/touch.sh, in batches sized to fit
 * the exec request; its report says which groups failed. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/api.h"
#include "common/buf.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/mbfs.h"
#include "fuse/transport/remote.h"
#include "fuse/transport/touch.h"

/* how fuse/guest/touch.sh reports a group it could not touch */
#define FAIL_MARK "!mbfs-touch-failed "
/* the most a group's arguments other than its paths and marks take:
 * " ATIME MTIME COUNT ''" (two times of at most 32 bytes, a count) */
#define GROUP_FIXED 96u
#define MARK_MAX 21u   /* one more number in a MARK */
/* touch.sh gathers a group's paths in time that grows with the square of
 * their number (about 1 s in dash for 4000 short names, 0.1 s as groups
 * of 256) */
#define GROUP_ITEMS 256u

/* A time as touch.sh takes it: "@SECONDS.NANOSECONDS" (touch -d), or "-"
 * to leave it alone. */
void mbfs_touch_time(char out[32], const struct timespec *ts)
{
	long long sec = ts->tv_sec;
	long nsec = ts->tv_nsec;
	const char *sign = "";
	if (nsec == UTIME_OMIT) {
		snprintf(out, 32, "-");
		return;
	}
	if (sec < 0 && nsec > 0) {     /* {-2, .5 s} is -1.5 s */
		sec = -(sec + 1);
		nsec = 1000000000L - nsec;
		sign = "-";
	} else if (sec < 0) {
		sec = -sec;
		sign = "-";
	}
	snprintf(out, 32, "@%s%lld.%09ld", sign, sec, nsec);
}

/* Items with the same times share one group: qsort order. */
static int item_cmp(const void *x, const void *y)
{
	const struct mbfs_touch *p = *(struct mbfs_touch *const *)x;
	const struct mbfs_touch *q = *(struct mbfs_touch *const *)y;
	const long long k[2][4] = {
		{ p->a.tv_sec, p->a.tv_nsec, p->m.tv_sec, p->m.tv_nsec },
		{ q->a.tv_sec, q->a.tv_nsec, q->m.tv_sec, q->m.tv_nsec },
	};
	for (int i = 0; i < 4; i++)
		if (k[0][i] != k[1][i])
			return k[0][i] < k[1][i] ? -1 : 1;
	return 0;
}

/* Run one script covering v[first..end) (items already failed are not in
 * it); record each item's outcome. */
static void run_script(struct mbfs *fs, const char *script, struct mbfs_touch **v,
		       size_t first, size_t end, char *why, size_t whysz)
{
	struct mb_exec_result res;
	struct mb_err err;
	int rc = mbfs_exec(fs, script, MBFS_EXEC_TIMEOUT_MS, &res, &err);
	if (rc) {
		rc = mbfs_fail(fs, rc, &err);
		snprintf(why, whysz, "%.200s", err.msg[0] ? err.msg : strerror(-rc));
	} else if (!mbfs_exec_ok(&res)) {
		rc = res.timed_out ? -ETIMEDOUT : mbfs_stderr_errno(res.errout);
		snprintf(why, whysz, "%.200s", res.errout && res.errout[0]
			 ? res.errout : strerror(-rc));
	}
	for (size_t i = first; i < end; i++)
		if (!v[i]->rc)
			v[i]->rc = rc;
	for (const char *s = res.out; !rc && s && (s = strstr(s, FAIL_MARK));) {
		s += strlen(FAIL_MARK);
		for (;;) {
			char *e;
			unsigned long long k = strtoull(s, &e, 10);
			if (e == s)
				break;
			if (k >= first && k < end)
				v[k]->rc = mbfs_stderr_errno(res.errout);
			s = e;
		}
	}
	if (!rc && res.errout && res.errout[0])
		snprintf(why, whysz, "%.200s", res.errout);
	mb_exec_result_release(&res);   /* zeroed when the request failed */
}

/* What text costs in the exec request: its JSON-escaped size, which is
 * at least its size, so a command within max bytes of cost fits both of
 * the exec's limits (16 KiB of command, 32 KiB of body: contract §3, §9.6). */
static size_t cost(const struct mb_buf *b)
{
	return b->data ? mb_exec_text_bytes(b->data, b->len) : 0;
}

/* The arguments of one touch.sh group being gathered: items of equal
 * times, v[first..] (less those that failed here). */
struct group {
	const struct mbfs_touch *key;   /* the times; NULL: no group open */
	size_t first, end, count;       /* its items are in v[first..end) */
	struct mb_buf paths;            /* " 'PATH'..." */
	struct mb_buf marks;            /* "3 4 5": the items, for FAIL_MARK */
	size_t pcost;                   /* cost of paths */
};

/* One touch.sh exec being filled: "set --" and whole groups. */
struct batch {
	struct mbfs *fs;
	struct mbfs_touch **v;
	struct mb_buf cmd;
	size_t first;                   /* v[first..] are in cmd */
	bool any;                       /* cmd holds a group */
	char *why;
	size_t whysz;
};

/* Run the batch for v[b->first..end) and start the next one. */
static void flush(struct batch *b, size_t end)
{
	if (b->any) {
		if (mbfs_sh_body(&b->cmd, mbfs_sh_touch)) {
			for (size_t k = b->first; k < end; k++)
				b->v[k]->rc = b->v[k]->rc ? b->v[k]->rc : -ENOMEM;
			snprintf(b->why, b->whysz, "out of memory");
		} else {
			run_script(b->fs, b->cmd.data, b->v, b->first, end,
				   b->why, b->whysz);
		}
	}
	mb_buf_reset(&b->cmd);
	b->any = false;
	b->first = end;
}

/* Close g: its arguments go into the batch, after running the batch
 * first when they would take it past max (base: what every batch costs
 * besides its groups). */
static void close_group(struct batch *b, struct group *g, size_t base,
			size_t max)
{
	struct mb_buf text;
	char at[32], mt[32];
	if (!g->key)
		return;
	mbfs_touch_time(at, &g->key->a);
	mbfs_touch_time(mt, &g->key->m);
	mb_buf_init(&text, 2 * max);
	int rc = mb_buf_appendf(&text, " %s %s %zu", at, mt, g->count);
	rc = rc ? rc : mbfs_sh_arg(&text, g->marks.data);
	rc = rc ? rc : mb_buf_append(&text, g->paths.data, g->paths.len);
	if (!rc && b->any && cost(&b->cmd) + cost(&text) + base > max)
		flush(b, g->first);
	if (!rc && !b->cmd.len) {
		rc = mb_buf_appends(&b->cmd, MBFS_SH_ARGS);
		rc = rc ? rc : mbfs_sh_arg(&b->cmd, b->fs->root);
	}
	rc = rc ? rc : mb_buf_append(&b->cmd, text.data, text.len);
	if (rc) {
		for (size_t k = g->first; k < g->end; k++)
			b->v[k]->rc = b->v[k]->rc ? b->v[k]->rc : -ENOMEM;
		snprintf(b->why, b->whysz, "out of memory");
	} else {
		b->any = true;
	}
	mb_buf_release(&text);
	mb_buf_reset(&g->paths);
	mb_buf_reset(&g->marks);
	g->key = NULL;
	g->count = g->pcost = 0;
}

/* Send the n items of v (in flight, owned by this send; reordered here)
 * as fuse/guest/touch.sh batches whose cost stays below the command
 * limit, one group per run of equal times. Outcomes in v[i]->rc; why: a
 * message for the log. */
void mbfs_touch_send(struct mbfs *fs, struct mbfs_touch **v, size_t n,
		     char *why, size_t whysz)
{
	const size_t max = MB_MAX_COMMAND_BYTES;
	struct batch b = { .fs = fs, .v = v, .why = why, .whysz = whysz };
	struct group g = { 0 };
	struct mb_buf q;
	mb_buf_init(&b.cmd, 2 * max);
	mb_buf_init(&g.paths, 2 * max);
	mb_buf_init(&g.marks, 2 * max);
	mb_buf_init(&q, 2 * max);
	/* what every batch costs besides its groups: "set --", the newline
	 * and the script */
	int rc = mb_buf_appends(&q, MBFS_SH_ARGS);
	rc = rc ? rc : mbfs_sh_arg(&q, fs->root);
	rc = rc ? rc : mbfs_sh_body(&q, mbfs_sh_touch);
	const size_t base = cost(&q);
	qsort(v, n, sizeof(*v), item_cmp);
	for (size_t i = 0; i < n && rc; i++)
		v[i]->rc = -ENOMEM;
	if (rc) {
		snprintf(why, whysz, "out of memory");
		n = 0;
	}
	for (size_t i = 0; i < n; i++) {
		char rpath[MB_PATH_MAX];
		size_t plen = g.paths.len;
		mb_buf_reset(&q);
		rc = mbfs_remote_path(fs, v[i]->path, rpath);
		rc = rc ? rc : mbfs_sh_arg(&q, rpath);
		size_t qcost = cost(&q);
		/* the most a group of this item alone takes */
		size_t alone = base + GROUP_FIXED + MARK_MAX + qcost;
		if (!rc && alone > max)
			rc = -ENAMETOOLONG;
		/* a new group for other times, or when this one is full or
		 * would not fit an exec with one more item */
		if (!rc && g.key && (item_cmp(&g.key, &v[i]) ||
				     g.count == GROUP_ITEMS ||
				     alone + g.marks.len + g.pcost > max)) {
			close_group(&b, &g, base, max);
			plen = 0;
		}
		rc = rc ? rc : mb_buf_append(&g.paths, q.data, q.len);
		if (!rc && (rc = mb_buf_appendf(&g.marks, "%s%zu",
						g.count ? " " : "", i))) {
			g.paths.len = plen;   /* a failed item leaves no trace */
			g.paths.data[plen] = '\0';
		}
		if (rc) {
			v[i]->rc = rc == -ENOMEM ? rc : -ENAMETOOLONG;
			snprintf(why, whysz, "%s", strerror(-v[i]->rc));
			continue;
		}
		if (!g.key) {
			g.key = v[i];
			g.first = i;
		}
		g.end = i + 1;
		g.count++;
		g.pcost += qcost;
	}
	close_group(&b, &g, base, max);
	flush(&b, n);
	mb_buf_release(&q);
	mb_buf_release(&g.marks);
	mb_buf_release(&g.paths);
	mb_buf_release(&b.cmd);
}
