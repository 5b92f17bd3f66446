/* mountinfo.c: the mbfs mounts of this mount namespace (see mountinfo.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mountinfo.h"

#define MOUNTINFO "/proc/self/mountinfo"

/* The kernel escapes space, tab, newline and backslash as \ooo. */
static void unescape(const char *s, size_t len, char *out, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++) {
		if (s[i] == '\\' && i + 3 < len &&
		    s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' &&
		    s[i + 3] >= '0' && s[i + 3] <= '7') {
			out[o++] = (char)((s[i + 1] - '0') * 64 +
					  (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* The n-th space-separated field of line (0-based), or NULL. */
static const char *field(const char *line, int n, size_t *len)
{
	const char *p = line;
	for (int i = 0; *p; i++) {
		const char *e = strchr(p, ' ');
		if (!e)
			e = p + strlen(p);
		if (i == n) {
			*len = (size_t)(e - p);
			return p;
		}
		if (!*e)
			break;
		p = e + 1;
	}
	return NULL;
}

/* 1 with m->mountpoint when line is an mbfs mount, else 0. Fields: id
 * parent major:minor root MOUNTPOINT options [optional...] - FSTYPE ... */
static int parse_line(const char *line, struct mb_mount *m)
{
	size_t mlen = 0, flen = 0;
	const char *mp = field(line, 4, &mlen);
	const char *sep = strstr(line, " - ");
	const char *fs = sep ? field(sep + 3, 0, &flen) : NULL;
	if (!mp || !fs || flen != strlen(MB_MOUNTINFO_FSTYPE) ||
	    memcmp(fs, MB_MOUNTINFO_FSTYPE, flen) != 0)
		return 0;
	memset(m, 0, sizeof(*m));
	unescape(mp, mlen, m->mountpoint, sizeof(m->mountpoint));
	return 1;
}

static void read_control(struct mb_mount *m)
{
	char path[MB_PATH_MAX + sizeof(MB_CONTROL_NAME) + 1];
	struct mb_err e;
	mb_err_clear(&e);
	snprintf(path, sizeof(path), "%s/%s",
		 strcmp(m->mountpoint, "/") ? m->mountpoint : "", MB_CONTROL_NAME);
	int r = mb_control_read(path, &m->ctl, &e);
	m->has_control = r == 0;
	m->control_errno = r ? -r : 0;
}

int mb_mountinfo_list(bool read_control_files, struct mb_mount **out,
		      size_t *n, struct mb_err *err)
{
	FILE *f = fopen(MOUNTINFO, "re");
	if (!f)
		return mb_err_set(err, errno, "cannot read '%s': %s", MOUNTINFO,
				  strerror(errno));
	struct mb_mount *v = NULL, m;
	size_t cnt = 0, cap = 0, lcap = 0;
	char *line = NULL;
	ssize_t len;
	int r = 0;
	while ((len = getline(&line, &lcap, f)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = '\0';
		if (!parse_line(line, &m))
			continue;
		if (cnt == cap) {
			size_t nc = cap ? 2 * cap : 4;
			struct mb_mount *nv = realloc(v, nc * sizeof(*v));
			if (!nv) {
				r = mb_err_set(err, ENOMEM, "out of memory");
				goto out;
			}
			v = nv;
			cap = nc;
		}
		v[cnt++] = m;
	}
	if (ferror(f)) {
		r = mb_err_set(err, EIO, "cannot read '%s'", MOUNTINFO);
		goto out;
	}
	for (size_t i = 0; read_control_files && i < cnt; i++)
		read_control(&v[i]);
	*out = v;
	*n = cnt;
	v = NULL;
out:
	free(line);
	free(v);
	fclose(f);
	return r;
}

int mb_mountinfo_at(const char *path, bool read_control_file,
		    struct mb_mount *out, struct mb_err *err)
{
	struct mb_mount *v = NULL;
	size_t n = 0;
	int r = mb_mountinfo_list(false, &v, &n, err);
	if (r)
		return r;
	for (size_t i = n; i-- > 0;) {
		if (strcmp(v[i].mountpoint, path) != 0)
			continue;
		*out = v[i];
		if (read_control_file)
			read_control(out);
		r = 1;
		break;
	}
	free(v);
	return r;
}

int mb_mountinfo_refuse(const char *path, struct mb_err *err)
{
	struct mb_mount m;
	struct mb_err e;
	mb_err_clear(&e);
	int r = mb_mountinfo_at(path, true, &m, &e);
	if (r <= 0)
		return 0;   /* no mount there, or no way to tell: go on */
	if (m.has_control)
		return mb_err_set(err, EBUSY, "mountpoint '%s' already holds an "
				  "mbfs mount of %s@%s: unmount it first "
				  "(fusermount3 -u '%s')", path, m.ctl.ident.id,
				  m.ctl.ident.created_at, path);
	return mb_err_set(err, EBUSY, "mountpoint '%s' already holds an mbfs "
			  "mount: unmount it first (fusermount3 -u '%s')",
			  path, path);
}
