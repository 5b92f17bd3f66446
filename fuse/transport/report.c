/* report.c: the guest scripts' reports, checked and decoded (report.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/transport/report.h"

#define NUM_MAX ((uint64_t)INT64_MAX)

/* A decimal number of at most max at *s; *s moves past its digits. */
static int dec(const char **s, uint64_t max, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (d > max || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*s = p;
	*out = v;
	return 0;
}

/* dec() then exactly the byte c (NUL: the end of s or a newline). */
static int dec_then(const char **s, char c, uint64_t max, uint64_t *out)
{
	if (dec(s, max, out))
		return -1;
	if (c == '\0' ? (**s && **s != '\n') : **s != c)
		return -1;
	if (**s)
		(*s)++;
	return 0;
}

int mbfs_xfer_numbers(const char *s, size_t max, uint64_t **v, size_t *n)
{
	size_t k = 0, cap = 16;
	*v = NULL;
	*n = 0;
	uint64_t *a = malloc(cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	while (s && *(s += strspn(s, "\n"))) {
		uint64_t x;
		if (k == max || dec_then(&s, '\0', NUM_MAX, &x)) {
			free(a);
			return -EIO;
		}
		if (k == cap) {
			uint64_t *na = realloc(a, 2 * cap * sizeof(*a));
			if (!na) {
				free(a);
				return -ENOMEM;
			}
			a = na;
			cap *= 2;
		}
		a[k++] = x;
	}
	*v = a;
	*n = k;
	return 0;
}

int mbfs_report_cut_head(const char *out, size_t *len, uint64_t *size,
			 struct mb_err *err)
{
	const char *start = out ? out : "", *p = start;
	uint64_t sz, ino, mt;
	if (dec_then(&p, ' ', NUM_MAX, &sz) || dec_then(&p, ' ', NUM_MAX, &ino) ||
	    dec(&p, NUM_MAX, &mt) || (*p && *p != '\n'))
		return mb_err_set(err, EIO, "split.sh's first line is not "
				  "\"SIZE INODE MTIME\"");
	*len = (size_t)(p - start);
	*size = sz;
	return 0;
}

int mbfs_report_pack(const char *out, size_t max, uint64_t max_total,
		     struct mbfs_pack_report *r, struct mb_err *err)
{
	const char *p = out ? out : "";
	uint64_t now, files, cut, ls;
	memset(r, 0, sizeof(*r));
	if (dec_then(&p, ' ', NUM_MAX, &now) ||
	    dec_then(&p, ' ', NUM_MAX, &files) ||
	    dec_then(&p, ' ', 1, &cut) || dec_then(&p, '\0', NUM_MAX, &ls))
		return mb_err_set(err, EIO, "pack.sh's first line is not "
				  "\"NOW FILES CUT LISTBYTES\"");
	r->now = (time_t)now;
	r->files = files;
	r->cut = cut != 0;
	r->ls = ls;
	int rc = mbfs_xfer_numbers(p, max, &r->sizes, &r->n);
	if (rc == -ENOMEM)
		return mb_err_set(err, ENOMEM, "out of memory");
	if (rc)
		return mb_err_set(err, EIO, "pack.sh's piece sizes are not one "
				  "number a line, at most %zu", max);
	for (size_t i = 0; i < r->n; i++) {
		if (r->sizes[i] > max_total - r->total)
			return mb_err_set(err, EIO, "pack.sh's pieces pass %llu "
					  "bytes", (unsigned long long)max_total);
		r->total += r->sizes[i];
	}
	if (!files && !ls ? r->n != 0 : !r->n || ls > r->total)
		return mb_err_set(err, EIO, "pack.sh's pieces do not match its "
				  "counts (%zu pieces, %llu files, %llu bytes of "
				  "listings)", r->n, (unsigned long long)files,
				  (unsigned long long)ls);
	return 0;
}

/* Three numbers at q, each after spaces, the last ended by a space or
 * the line's end. */
static int three(const char *q, uint64_t v[3])
{
	for (int k = 0; k < 3; k++) {
		q += strspn(q, " ");
		if (dec(&q, NUM_MAX, &v[k]) || (*q != ' ' && (k < 2 ||
		    (*q && *q != '\n'))))
			return -1;
	}
	return 0;
}

int mbfs_report_df(const char *out, struct statvfs *sv, struct mb_err *err)
{
	uint64_t v[2][3];
	int got = 0;
	memset(sv, 0, sizeof(*sv));
	for (const char *line = out; line && *line && got < 2;) {
		const char *nl = strchr(line, '\n');
		/* NAME may hold spaces: the first run of three numbers after
		 * a space; a header line has none */
		for (const char *p = strchr(line, ' '); p && (!nl || p < nl);
		     p = strchr(p + 1, ' '))
			if (!three(p, v[got])) {
				got++;
				break;
			}
		line = nl ? nl + 1 : NULL;
	}
	if (got < 1)
		return mb_err_set(err, EIO, "statfs.sh printed no df data line");
	sv->f_bsize = 4096;
	sv->f_frsize = 1024;
	sv->f_blocks = v[0][0];
	sv->f_bfree = v[0][2];
	sv->f_bavail = v[0][2];
	if (got == 2) {
		sv->f_files = v[1][0];
		sv->f_ffree = v[1][2];
		sv->f_favail = v[1][2];
	}
	sv->f_namemax = 255;
	return 0;
}

int mbfs_report_apply(const char *out,
		      int (*fn)(void *ud, char kind, uint64_t i,
				const char *why, size_t whylen),
		      void *ud, uint64_t *count, struct mb_err *err)
{
	bool ok = false;
	size_t lineno = 0;
	for (const char *l = out ? out : ""; *l; lineno++) {
		const char *e = strchr(l, '\n');
		size_t ll = e ? (size_t)(e - l) : strlen(l);
		const char *p = l + 2;
		uint64_t i;
		if (ok)
			return mb_err_set(err, EIO, "apply.sh's report goes on "
					  "after its \"ok\" line");
		if (ll > 2 && strchr("wxyz", l[0]) && l[1] == ' ' &&
		    dec(&p, NUM_MAX, &i) == 0 && (p == l + ll || *p == ' ')) {
			const char *why = p < l + ll ? p + 1 : p;
			if (fn(ud, l[0], i, why, (size_t)(l + ll - why)))
				return mb_err_set(err, EIO, "apply.sh's report "
						  "line %zu names no item of the "
						  "batch", lineno + 1);
		} else if (ll > 3 && strncmp(l, "ok ", 3) == 0 &&
			   (p = l + 3, dec(&p, NUM_MAX, &i) == 0) &&
			   p == l + ll) {
			*count = i;
			ok = true;
		} else {
			return mb_err_set(err, EIO, "apply.sh's report line %zu "
					  "is not understood", lineno + 1);
		}
		l += ll + (e ? 1 : 0);
	}
	if (!ok)
		return mb_err_set(err, EIO, "apply.sh's report has no \"ok\" line");
	return 0;
}

int mbfs_report_sha256(const char *out, size_t len, char hex[65],
		       struct mb_err *err)
{
	/* GNU sha256sum starts the line with a backslash when it escapes
	 * the name (a newline or a backslash in it) */
	if (out && len && out[0] == '\\') {
		out++;
		len--;
	}
	if (!out || len < 65 || strspn(out, "0123456789abcdef") != 64 ||
	    out[64] != ' ')
		return mb_err_set(err, EIO, "sha256sum's answer is not \"HEX  "
				  "PATH\"");
	memcpy(hex, out, 64);
	hex[64] = '\0';
	return 0;
}
