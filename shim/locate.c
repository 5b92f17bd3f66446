/* locate.c: which sandbox, which remote directory.
 *
 * The identity comes from the control file of the mount that contains the
 * current directory (mb_control_find walks up), or of --mount DIR. The
 * remote directory is the mount's root plus the local path relative to the
 * mount; -C DIR names another one (a local path inside a mount, or an
 * absolute remote path). Also: telling the mount that a command finished.
 * Does not talk to the service.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/ident.h"
#include "shim/mbexec.h"
#include "shim/result.h"

#define FUSE_SUPER_MAGIC 0x65735546

/* Collapse "//", "." and ".." of an absolute path in place (lexically). */
static void normalise(char *p)
{
	char *src = p, *dst = p;

	while (*src) {
		while (*src == '/')
			src++;
		if (!*src)
			break;
		if (src[0] == '.' && (src[1] == '/' || !src[1])) {
			src++;
			continue;
		}
		if (src[0] == '.' && src[1] == '.' && (src[2] == '/' || !src[2])) {
			src += 2;
			while (dst > p && *--dst != '/')
				;
			continue;
		}
		*dst++ = '/';
		while (*src && *src != '/')
			*dst++ = *src++;
	}
	if (dst == p)
		*dst++ = '/';
	*dst = '\0';
}

/* out = root joined with rel ("" or "a/b"). 0 or -ENAMETOOLONG. */
static int join_remote(const char *root, const char *rel, char out[MB_PATH_MAX])
{
	int n;

	if (!*rel)
		n = snprintf(out, MB_PATH_MAX, "%s", root);
	else
		n = snprintf(out, MB_PATH_MAX, "%s/%s",
			     strcmp(root, "/") ? root : "", rel);
	if (n < 0 || n >= MB_PATH_MAX)
		return -ENAMETOOLONG;
	normalise(out);
	return 0;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* The deepest FUSE mount point containing the absolute path (from
 * /proc/self/mountinfo), so the control file is read from the mount root
 * directly: walking up through the mount would cost the mount one remote
 * lookup per level right after a command has invalidated its caches.
 * 0, or -ENOENT. */
static int fuse_mount_of(const char *path, char out[MB_PATH_MAX])
{
	char *line = NULL, *mp, *dash, *fstype, *save;
	size_t cap = 0, best = 0, n;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int i;

	if (!f)
		return -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		dash = strstr(line, " - ");
		if (!dash)
			continue;
		fstype = strtok_r(dash + 3, " ", &save);
		if (!fstype || strncmp(fstype, "fuse", 4))
			continue;
		mp = strtok_r(line, " ", &save);
		for (i = 0; mp && i < 4; i++)
			mp = strtok_r(NULL, " ", &save);
		if (!mp)
			continue;
		unescape(mp);
		n = strlen(mp);
		if (n <= best || n >= MB_PATH_MAX || strncmp(path, mp, n) ||
		    (path[n] && path[n] != '/' && strcmp(mp, "/")))
			continue;
		memcpy(out, mp, n + 1);
		best = n;
	}
	free(line);
	fclose(f);
	return best ? 0 : -ENOENT;
}

/* rel of path below dir, or NULL when path is not dir or below it. */
static const char *below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return path + 1;
	if (strncmp(path, dir, n) || (path[n] && path[n] != '/'))
		return NULL;
	return path[n] ? path + n + 1 : path + n;
}

/* Find the mount containing the existing local directory dir: fills the
 * control, the local mount directory and rel. 0, -ENOENT, or -errno with a
 * message in err. */
static int find_mount(const char *dir, struct mb_control *c,
		      char mount_dir[MB_PATH_MAX], char rel[MB_PATH_MAX],
		      struct mb_err *err)
{
	char full[PATH_MAX], mp[MB_PATH_MAX], ctl[MB_PATH_MAX + 16];
	const char *r2;
	size_t fl, rl;
	int r;

	/* fast path for an absolute, canonical dir (getcwd) on a FUSE mount */
	if (dir[0] == '/' && fuse_mount_of(dir, mp) == 0 &&
	    (r2 = below(dir, mp)) && strlen(r2) < MB_PATH_MAX) {
		snprintf(ctl, sizeof(ctl), "%s/%s", strcmp(mp, "/") ? mp : "",
			 MB_CONTROL_NAME);
		if (mb_control_read(ctl, c, err) == 0) {
			snprintf(rel, MB_PATH_MAX, "%s", r2);
			memcpy(mount_dir, mp, sizeof(mp));
			return 0;
		}
		mb_err_clear(err);
	}
	r = mb_control_find(dir, c, rel, err);
	if (r)
		return r;
	if (!realpath(dir, full))
		return mb_err_set(err, errno, "cannot resolve '%s': %s", dir,
				  strerror(errno));
	fl = strlen(full);
	rl = strlen(rel);
	if (rl) {
		if (fl < rl + 1)
			return mb_err_set(err, EINVAL, "cannot place '%s' in its mount", dir);
		fl -= rl + 1;
	}
	if (fl == 0)
		fl = 1;   /* the mount is "/" itself */
	if (fl >= MB_PATH_MAX)
		return mb_err_set(err, ENAMETOOLONG, "path too long: '%s'", dir);
	memcpy(mount_dir, full, fl);
	mount_dir[fl] = '\0';
	return 0;
}

/* Through mbx_error(): --json reports it in "error" too. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mbx_error("%s", msg);
	return MBX_EXIT_USAGE;
}

int mbx_locate(const struct mbx_opts *o, struct mbx_target *t)
{
	char cwd[PATH_MAX], want[PATH_MAX + MB_PATH_MAX], rel[MB_PATH_MAX];
	char cdir[MB_PATH_MAX];
	struct mb_control c2;
	struct mb_err err;
	bool have = false;
	const char *r;
	int n;

	memset(t, 0, sizeof(*t));
	if (!getcwd(cwd, sizeof(cwd)))
		return fail("cannot read the current directory: %s%s",
			    strerror(errno), "");

	if (o->mount) {
		mb_err_clear(&err);
		if (find_mount(o->mount, &t->control, t->mount_dir, rel, &err))
			return fail("--mount: %s", err.msg);   /* err names the dir */
		/* --mount names a directory inside the mount: run there unless
		 * the current directory is inside the same mount. */
		if (!join_remote(t->control.root, rel, t->remote_cwd))
			have = true;
		r = below(cwd, t->mount_dir);
		if (r && join_remote(t->control.root, r, t->remote_cwd))
			return fail("path too long: '%s'%s", cwd, "");
	} else {
		mb_err_clear(&err);
		if (find_mount(cwd, &t->control, t->mount_dir, rel, &err) == 0) {
			if (join_remote(t->control.root, rel, t->remote_cwd))
				return fail("path too long: '%s'%s", cwd, "");
			have = true;
		}
	}

	if (o->cwd) {
		/* a local path: absolute, or relative to the current directory */
		if (o->cwd[0] == '/')
			n = snprintf(want, sizeof(want), "%s", o->cwd);
		else
			n = snprintf(want, sizeof(want), "%s/%s", cwd, o->cwd);
		if (n < 0 || (size_t)n >= sizeof(want) || (size_t)n >= MB_PATH_MAX)
			return fail("-C '%s': path too long%s", o->cwd, "");
		normalise(want);
		if (have && (r = below(want, t->mount_dir))) {
			if (join_remote(t->control.root, r, t->remote_cwd))
				return fail("-C '%s': path too long%s", o->cwd, "");
		} else if (access(want, F_OK) == 0 &&
			   find_mount(want, &c2, cdir, rel, &err) == 0) {
			if (o->mount && (strcmp(c2.ident.id, t->control.ident.id) ||
					 strcmp(c2.ident.created_at,
						t->control.ident.created_at)))
				return fail("-C '%s' is inside another mount than "
					    "--mount '%s'", o->cwd, o->mount);
			t->control = c2;
			memcpy(t->mount_dir, cdir, sizeof(cdir));
			if (join_remote(c2.root, rel, t->remote_cwd))
				return fail("-C '%s': path too long%s", o->cwd, "");
			have = true;
		} else if (have && o->cwd[0] == '/') {
			/* not local: an absolute path on the sandbox */
			snprintf(t->remote_cwd, MB_PATH_MAX, "%s", o->cwd);
			normalise(t->remote_cwd);
		} else if (have) {
			/* relative, not found locally: relative to the remote
			 * cwd (joined through a copy: snprintf must not read
			 * the buffer it writes) */
			char base[MB_PATH_MAX];

			memcpy(base, t->remote_cwd, sizeof(base));
			if (join_remote(base, o->cwd, t->remote_cwd))
				return fail("-C '%s': path too long%s", o->cwd, "");
		} else {
			return fail("-C '%s' is not inside a Mainbrella mount, and "
				    "the current directory is not either; cd into "
				    "a mount or add --mount DIR%s", o->cwd, "");
		}
	}

	if (!have)
		return fail("the current directory '%s' is not inside a "
			    "Mainbrella mount%s; cd into a mount (mbfs CONTAINER "
			    "DIR mounts one), or name it with --mount DIR",
			    cwd, "");
	if (!t->control.api_url[0] || !t->control.ident.id[0] ||
	    !t->control.ident.created_at[0])
		return fail("the control file in '%s' lacks the sandbox "
			    "identity%s; remount it", t->mount_dir, "");
	return 0;
}

/* Write one control line to a live mbfs control file. 0, 1 when there is
 * none (a plain file in a hand-made directory would be overwritten, so only
 * a FUSE one takes commands), or -errno from the write. */
static int control_write(const struct mbx_target *t, const char *line)
{
	char path[MB_PATH_MAX + sizeof(MB_CONTROL_NAME) + 2];
	struct statfs sfs;
	ssize_t w;
	int fd, r = 1;

	if (!t->mount_dir[0])
		return 1;
	snprintf(path, sizeof(path), "%s/%s",
		 strcmp(t->mount_dir, "/") ? t->mount_dir : "", MB_CONTROL_NAME);
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return 1;
	if (fstatfs(fd, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC) {
		do
			w = write(fd, line, strlen(line));
		while (w < 0 && errno == EINTR);
		r = w < 0 ? -errno : 0;
	}
	close(fd);
	return r;
}

int mbx_sync_mount(const struct mbx_target *t)
{
	int r = control_write(t, MB_CONTROL_SYNC);

	/* a mount that does not know the message refuses it: nothing to push */
	return r == -EIO ? r : r == -EEXIST ? 1 : 0;
}

void mbx_invalidate_mount(const struct mbx_target *t)
{
	(void)control_write(t, MB_CONTROL_INVALIDATE);
}
