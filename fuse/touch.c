/* touch.c: setting file times on the guest with touch (touch.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/api.h"
#include "common/buf.h"
#include "fuse/mbfs.h"
#include "fuse/remote.h"
#include "fuse/touch.h"

#define EXEC_TIMEOUT_MS 50000L
#define FAIL_MARK "!mbfs-touch-failed "

static int append_touch(struct mb_buf *b, const char *flag,
			const struct timespec *ts, const char *qpath)
{
	long long sec = ts->tv_sec;
	long nsec = ts->tv_nsec;
	const char *sign = "";
	if (sec < 0 && nsec > 0) {     /* {-2, .5 s} is -1.5 s */
		sec = -(sec + 1);
		nsec = 1000000000L - nsec;
		sign = "-";
	} else if (sec < 0) {
		sec = -sec;
		sign = "-";
	}
	return mb_buf_appendf(b, "touch -c -h %s-d @%s%lld.%09ld -- %s", flag,
			      sign, sec, nsec, qpath);
}

/* Items with the same times share one touch: qsort order. */
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

/* The touch command(s) setting key's times on paths (quoted, separated by
 * spaces), and the marker listing the items (" 3 4 5") when they fail. */
static int compose(struct mb_buf *out, const struct mbfs_touch *key,
		   const char *paths, const char *marks)
{
	bool aset = key->a.tv_nsec != UTIME_OMIT;
	bool mset = key->m.tv_nsec != UTIME_OMIT;
	int rc;
	if (aset && mset && key->a.tv_sec == key->m.tv_sec &&
	    key->a.tv_nsec == key->m.tv_nsec) {
		rc = append_touch(out, "", &key->m, paths);
	} else {
		rc = mb_buf_appends(out, "{ ");
		if (!rc && aset)
			rc = append_touch(out, "-a ", &key->a, paths);
		if (!rc && aset && mset)
			rc = mb_buf_appends(out, " && ");
		if (!rc && mset)
			rc = append_touch(out, "-m ", &key->m, paths);
		if (!rc)
			rc = mb_buf_appends(out, "; }");
	}
	if (!rc)
		rc = mb_buf_appendf(out, " || echo '" FAIL_MARK "%s'\n", marks);
	return rc;
}

/* How many times compose() writes the paths. */
static size_t copies(const struct mbfs_touch *key)
{
	bool both = key->a.tv_nsec != UTIME_OMIT && key->m.tv_nsec != UTIME_OMIT;
	return both && (key->a.tv_sec != key->m.tv_sec ||
			key->a.tv_nsec != key->m.tv_nsec) ? 2 : 1;
}

/* Run one script covering v[first..end) (items already failed are not in
 * it); record each item's outcome. */
static void run_script(struct mbfs *fs, const char *script, struct mbfs_touch **v,
		       size_t first, size_t end, char *why, size_t whysz)
{
	struct mb_exec_result res;
	struct mb_err err;
	int rc = mbfs_exec(fs, script, EXEC_TIMEOUT_MS, &res, &err);
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
 * at least its size, so a script within max bytes of cost fits both of the
 * exec's limits (16 KiB of command, 32 KiB of body: contract §3, §9.6). */
static size_t cost(const struct mb_buf *b)
{
	return b->data ? mb_exec_text_bytes(b->data, b->len) : 0;
}

/* Send the n items of v (in flight, owned by this send; reordered here)
 * in scripts below the command limit, one touch per run of equal times.
 * Outcomes in v[i]->rc; why: a message for the log. */
void mbfs_touch_send(struct mbfs *fs, struct mbfs_touch **v, size_t n,
		     char *why, size_t whysz)
{
	const size_t max = MB_MAX_COMMAND_BYTES;
	struct mb_buf script, line, paths, marks, q;
	mb_buf_init(&script, max);
	mb_buf_init(&line, max);
	mb_buf_init(&paths, max);
	mb_buf_init(&marks, max);
	mb_buf_init(&q, max);
	qsort(v, n, sizeof(*v), item_cmp);
	const struct mbfs_touch *key = NULL;   /* times of the open line */
	size_t first = 0, lfirst = 0;
	/* costs: the open line without paths and marks, its paths, the script */
	size_t fixed = 0, pcost = 0, scost = 0;
	for (size_t i = 0; i <= n; i++) {
		char rpath[MB_PATH_MAX];
		int rc = 0;
		mb_buf_reset(&q);
		if (i < n && !(rc = mbfs_remote_path(fs, v[i]->path, rpath)))
			rc = mb_buf_append_shq(&q, rpath);
		size_t qcost = cost(&q);
		size_t need = key ? fixed + copies(key) * (pcost + 1 + qcost) +
				    marks.len + 24 : 0;
		if (key && (i == n || rc || item_cmp(&key, &v[i]) || need > max)) {
			size_t len = fixed + copies(key) * pcost + marks.len;
			mb_buf_reset(&line);
			if (script.len && scost + len > max) {
				run_script(fs, script.data, v, first, lfirst,
					   why, whysz);
				mb_buf_reset(&script);
				scost = 0;
				first = lfirst;
			}
			if (compose(&line, key, paths.data, marks.data) ||
			    mb_buf_append(&script, line.data, line.len)) {
				for (size_t k = lfirst; k < i; k++)
					v[k]->rc = v[k]->rc ? v[k]->rc : -ENOMEM;
				snprintf(why, whysz, "out of memory");
			} else {
				scost += cost(&line);
			}
			key = NULL;
			mb_buf_reset(&paths);
			mb_buf_reset(&marks);
			pcost = 0;
		}
		if (i == n)
			break;
		if (!key && !rc) {
			key = v[i];
			lfirst = i;
			mb_buf_reset(&line);
			rc = compose(&line, key, "", "");
			fixed = cost(&line);
			if (!rc && fixed + copies(key) * qcost + 24 > max)
				rc = -ENAMETOOLONG;
			if (rc)
				key = NULL;
		}
		if (!rc && paths.len) {
			rc = mb_buf_appends(&paths, " ");
			pcost += rc ? 0 : 1;
		}
		if (!rc && !(rc = mb_buf_append(&paths, q.data, q.len)))
			pcost += qcost;
		if (!rc)
			rc = mb_buf_appendf(&marks, " %zu", i);
		if (rc) {
			v[i]->rc = rc == -ENOMEM ? rc : -ENAMETOOLONG;
			snprintf(why, whysz, "%s", strerror(-v[i]->rc));
			if (key && !paths.len)
				key = NULL;
		}
	}
	if (script.len)
		run_script(fs, script.data, v, first, n, why, whysz);
	mb_buf_release(&q);
	mb_buf_release(&marks);
	mb_buf_release(&paths);
	mb_buf_release(&line);
	mb_buf_release(&script);
}
