/* limiter.c: machine-wide slots per (API URL, container id).
 *
 * One lock file per key under $XDG_RUNTIME_DIR/mainbrella/ (or
 * /tmp/mainbrella-<uid>/, mode 0700); its name holds a hash of the key so any
 * URL fits. A slot is a write lock on byte i (0..MB_LIMIT_SLOTS-1) taken with
 * F_OFD_SETLK. OFD locks belong to the open file description, so every
 * acquire opens its own descriptor: threads of one process then exclude each
 * other too, and a crashed process frees its slots when its fds close.
 * A waiter polls with a short jittered sleep; no lock is ever held while
 * sleeping, so nothing can deadlock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limiter.h"
#include "common/util.h"

struct mb_limiter {
	char path[4200];
};

struct mb_limit_slot {
	int fd;
};

static int private_dir(char *out, size_t size, struct mb_err *err)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (xdg && *xdg && xdg[0] == '/' && access(xdg, W_OK | X_OK) == 0)
		snprintf(out, size, "%s/mainbrella", xdg);
	else
		snprintf(out, size, "/tmp/mainbrella-%u", (unsigned)getuid());
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return mb_err_set(err, errno, "cannot create '%s': %s", out,
				  strerror(errno));
	/* refuse a directory someone else planted in /tmp */
	if (lstat(out, &st) < 0)
		return mb_err_set(err, errno, "cannot stat '%s': %s", out,
				  strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
		return mb_err_set(err, EPERM,
				  "lock directory '%s' must be a directory owned by you with mode 0700",
				  out);
	return 0;
}

int mb_limiter_open(const char *key, struct mb_limiter **out, struct mb_err *err)
{
	struct mb_limiter *l;
	char dir[4096], hash[65];
	int fd, r;

	l = calloc(1, sizeof(*l));
	if (!l)
		return mb_err_set(err, ENOMEM, "out of memory");
	r = private_dir(dir, sizeof(dir), err);
	if (r)
		goto fail;
	mb_sha256_hex(key, strlen(key), hash);
	snprintf(l->path, sizeof(l->path), "%s/slots-%.32s.lock", dir, hash);
	fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = mb_err_set(err, errno, "cannot open lock file '%s': %s",
			       l->path, strerror(errno));
		goto fail;
	}
	close(fd);
	*out = l;
	return 0;
fail:
	free(l);
	return r;
}

void mb_limiter_free(struct mb_limiter *l)
{
	free(l);
}

/* Try each slot once on fd; 0 when one is held, -EAGAIN when all busy. */
static int try_slots(int fd)
{
	unsigned start = (unsigned)(mb_backoff_ms(0, 2 * MB_LIMIT_SLOTS, 2 * MB_LIMIT_SLOTS));
	int i;

	/* start at a random slot so waiters do not all hammer byte 0 */
	for (i = 0; i < MB_LIMIT_SLOTS; i++) {
		struct flock fl;

		memset(&fl, 0, sizeof(fl));
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = (off_t)((start + (unsigned)i) % MB_LIMIT_SLOTS);
		fl.l_len = 1;
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES && errno != EINTR)
			return -errno;
	}
	return -EAGAIN;
}

int mb_limiter_acquire(struct mb_limiter *l, long timeout_ms,
		       struct mb_limit_slot **out, struct mb_err *err)
{
	uint64_t deadline = timeout_ms >= 0 ? mb_now_ms() + (uint64_t)timeout_ms : 0;
	struct mb_limit_slot *s;
	int fd = -1, r;

	s = malloc(sizeof(*s));
	if (!s)
		return mb_err_set(err, ENOMEM, "out of memory");
	fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = mb_err_set(err, errno, "cannot open lock file '%s': %s",
			       l->path, strerror(errno));
		goto fail;
	}
	for (;;) {
		r = try_slots(fd);
		if (r == 0)
			break;
		if (r != -EAGAIN) {
			r = mb_err_set(err, -r, "cannot lock '%s': %s", l->path,
				       strerror(-r));
			goto fail;
		}
		if (timeout_ms >= 0 && mb_now_ms() >= deadline) {
			r = mb_err_set(err, ETIMEDOUT,
				       "timed out waiting for a free operation slot (%d in use on this machine)",
				       MB_LIMIT_SLOTS);
			goto fail;
		}
		mb_sleep_ms(mb_backoff_ms(0, 30, 30) - 10);  /* 5..20 ms */
	}
	s->fd = fd;
	*out = s;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(s);
	return r;
}

void mb_limiter_release(struct mb_limit_slot *s)
{
	if (!s)
		return;
	/* closing the description drops its OFD lock */
	close(s->fd);
	free(s);
}
