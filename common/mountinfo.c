/* mountinfo.c: the mbfs mounts of this mount namespace (see mountinfo.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/mountinfo.h"
#include "common/util.h"

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

/* A mount whose daemon is stuck (every thread waiting on a silent
 * service) would hold a read of its control file, and with it the
 * command that lists mounts: the read goes in a child, given this long. */
#define CONTROL_READ_MS 3000

/* A reader left stuck must not hold the caller's output open (whoever
 * reads our stdout to its end would wait as long), nor any other fd. */
static void detach_reader(int keep)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; null >= 0 && fd <= 2; fd++)
		if (fd != keep)
			dup2(null, fd);
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	close_range(keep >= 3 ? (unsigned)keep + 1 : 3, ~0u, 0);
}

/* Starts the read of m's control file: the fd its answer comes on, or -1
 * (m says why). The reader is a grandchild, so that a read stuck in the
 * kernel (a FUSE request already taken by its daemon cannot be killed)
 * holds nobody: it goes to init, and ends with its read. */
static int start_read(struct mb_mount *m)
{
	char path[MB_PATH_MAX + sizeof(MB_CONTROL_NAME) + 1];
	int fds[2];
	snprintf(path, sizeof(path), "%s/%s",
		 strcmp(m->mountpoint, "/") ? m->mountpoint : "", MB_CONTROL_NAME);
	m->has_control = false;
	m->control_errno = EIO;
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid == 0 && fork() != 0)
		_exit(0);
	if (pid == 0) {
		detach_reader(fds[1]);
		struct mb_err e;
		struct mb_control c;
		mb_err_clear(&e);
		int r = mb_control_read(path, &c, &e);
		ssize_t w = r ? write(fds[1], &r, sizeof(r))
			      : write(fds[1], &c, sizeof(c));
		_exit(w < 0);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	waitpid(pid, NULL, 0);   /* the child: gone at once */
	return fds[0];
}

union answer {
	struct mb_control c;
	int r;
};

/* The control files of the n mounts at v, read side by side: a mount that
 * does not answer costs CONTROL_READ_MS once, however many there are. */
static void read_controls(struct mb_mount *v, size_t n)
{
	if (!n)
		return;
	struct pollfd *pfd = calloc(n, sizeof(*pfd));
	union answer *got = calloc(n, sizeof(*got));
	size_t *have = calloc(n, sizeof(*have));
	if (!pfd || !got || !have) {
		for (size_t i = 0; i < n; i++) {
			v[i].has_control = false;
			v[i].control_errno = ENOMEM;
		}
		goto out;
	}
	size_t open_n = 0;
	for (size_t i = 0; i < n; i++) {
		pfd[i].fd = start_read(&v[i]);
		pfd[i].events = POLLIN;
		open_n += pfd[i].fd >= 0;
	}
	uint64_t until = mb_now_ms() + CONTROL_READ_MS;
	while (open_n > 0) {
		uint64_t now = mb_now_ms();
		int k = now >= until ? 0 : poll(pfd, n, (int)(until - now));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		for (size_t i = 0; i < n; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			ssize_t r = read(pfd[i].fd, (char *)&got[i] + have[i],
					 sizeof(got[i].c) - have[i]);
			if (r > 0)
				have[i] += (size_t)r;
			if (r <= 0 || have[i] == sizeof(got[i].c)) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_n--;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (pfd[i].fd >= 0) {    /* still reading: the deadline passed */
			close(pfd[i].fd);
			v[i].control_errno = ETIMEDOUT;
		} else if (have[i] == sizeof(got[i].c)) {
			v[i].ctl = got[i].c;
			v[i].has_control = true;
			v[i].control_errno = 0;
		} else if (have[i] == sizeof(got[i].r) && got[i].r < 0) {
			v[i].control_errno = -got[i].r;
		}
	}
out:
	free(pfd);
	free(got);
	free(have);
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
	if (read_control_files)
		read_controls(v, cnt);
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
			read_controls(out, 1);
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
