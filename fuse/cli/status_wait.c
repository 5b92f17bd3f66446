/* status_wait.c: `mbfs --status --wait` (status_int.h). The control
 * file's "sync" write returns once the mount has sent everything it held
 * back; on a terminal a thread makes that write while this one rewrites a
 * progress line on stderr (files and bytes left, from the control file)
 * until it returns, as `rclone -P` does. Not a terminal: nothing but the
 * write.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ident.h"
#include "fuse/cli/status_int.h"

#define PROGRESS_MS 250   /* between two progress lines */

struct sync_call {
	int fd;          /* the control file, open for writing */
	int done[2];     /* a pipe: written once the write returned */
	ssize_t w;       /* the write's result */
	int err;         /* its errno */
};

static void sync_write(struct sync_call *s)
{
	do
		s->w = write(s->fd, MB_CONTROL_SYNC, strlen(MB_CONTROL_SYNC));
	while (s->w < 0 && errno == EINTR);
	s->err = s->w < 0 ? errno : 0;
}

static void *sync_main(void *arg)
{
	struct sync_call *s = arg;
	sync_write(s);
	if (write(s->done[1], "", 1) < 0) {
		/* the reader polls for it; nothing else to tell */
	}
	return NULL;
}

/* One progress line, over the one before (width: the longest so far). */
static void progress_line(const char *path, int *width)
{
	struct mbfs_status f;
	cJSON *doc = NULL;
	if (mbfs_status_facts(path, &doc, &f))
		return;
	char b[64], line[256];
	mbfs_status_human(f.pending_bytes, b, sizeof(b));
	int n = snprintf(line, sizeof(line), "waiting: %.0f file%s, %s left "
			 "to send", f.pending_files,
			 f.pending_files == 1 ? "" : "s", b);
	if (f.uploading_files > 0) {
		char s[64], t[64];
		mbfs_status_human(f.uploading_sent, s, sizeof(s));
		mbfs_status_human(f.uploading_bytes, t, sizeof(t));
		n += snprintf(line + n, sizeof(line) - (size_t)n,
			      " (uploading %s of %s)", s, t);
	}
	cJSON_Delete(doc);
	if (n > *width)
		*width = n;
	fprintf(stderr, "\r%-*s", *width, line);
	fflush(stderr);
}

/* The write in a thread, progress here until it returns. */
static int sync_with_progress(struct sync_call *s, const char *path)
{
	pthread_t t;
	if (pipe2(s->done, O_CLOEXEC))
		return -errno;
	if (pthread_create(&t, NULL, sync_main, s)) {
		close(s->done[0]);
		close(s->done[1]);
		return -EAGAIN;
	}
	int width = 0;
	struct pollfd p = { .fd = s->done[0], .events = POLLIN };
	while (poll(&p, 1, PROGRESS_MS) <= 0)
		progress_line(path, &width);
	pthread_join(t, NULL);
	if (width)
		fprintf(stderr, "\r%*s\r", width, "");
	close(s->done[0]);
	close(s->done[1]);
	return 0;
}

int mbfs_status_wait(const char *path, const char *mnt)
{
	struct sync_call s = { .fd = open(path, O_WRONLY | O_CLOEXEC) };
	if (s.fd < 0) {
		fprintf(stderr, "mbfs: '%s' is not an mbfs mount (or not yours): "
			"%s\n", mnt, strerror(errno));
		return 2;
	}
	if (!isatty(STDERR_FILENO) || sync_with_progress(&s, path))
		sync_write(&s);
	close(s.fd);
	/* EEXIST: conflicts, each kept (the status says which) */
	if (s.w < 0 && (s.err == EIO || s.err == EEXIST))
		return 1;
	if (s.w < 0) {
		fprintf(stderr, "mbfs: cannot wait for '%s': %s\n", mnt,
			strerror(s.err));
		return 2;
	}
	return 0;
}
