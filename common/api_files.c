/* api_files.c: whole-file GET and PUT, and the workspace export. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/api_core.h"

int mb_file_get(struct mb_client *c, const struct mb_ident *who,
		const char *path, struct mb_buf *out, struct mb_err *err)
{
	const char *query[] = { "path", path, NULL };
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_FILE_GET, .what = what, .method = "GET",
		.route = "/containers/files", .who = who, .query = query,
		.pool = true, .retry = MB_RETRY_READ,
		.max_body = MB_MAX_FILE_BYTES + 4096,
	};
	struct mb_http_resp resp;
	int r;

	mb_call_what(what, sizeof(what), "cannot read", path);
	mb_http_resp_init(&resp);
	r = mb_call_run(c, &k, &resp, err);
	if (r)
		goto out;
	if (resp.body.len > MB_MAX_FILE_BYTES) {
		r = mb_err_set(err, EFBIG, "%s: answer larger than 1 MiB", what);
		goto out;
	}
	r = mb_buf_append(out, resp.body.data, resp.body.len);
	if (r)
		r = mb_err_set(err, -r, "%s: %s", what,
			       r == -E2BIG ? "buffer too small" : "out of memory");
out:
	mb_http_resp_release(&resp);
	return r;
}

int mb_file_put(struct mb_client *c, const struct mb_ident *who,
		const char *path, const void *data, size_t len,
		struct mb_err *err)
{
	const char *query[] = { "path", path, NULL };
	char what[MB_WHAT_MAX];
	struct mb_call k = {
		.op = MB_OP_FILE_PUT, .what = what, .method = "PUT",
		.route = "/containers/files", .who = who, .query = query,
		.pool = true, .retry = MB_RETRY_MUTATION,
		.content_type = "application/octet-stream",
		.body = data, .body_len = len, .has_body = true,
	};
	struct mb_http_resp resp;
	int r;

	mb_call_what(what, sizeof(what), "cannot write", path);
	if (len > MB_MAX_FILE_BYTES)
		return mb_err_set(err, EFBIG, "%s: file larger than 1 MiB (%zu bytes)",
				  what, len);
	mb_http_resp_init(&resp);
	r = mb_call_run(c, &k, &resp, err);
	mb_http_resp_release(&resp);
	return r;
}

struct export_sink {
	int fd;
	off_t start;       /* offset at the start, -1 when fd cannot seek */
	size_t written;
	int werr;          /* errno of a failed write */
};

static int export_write(const char *p, size_t n, void *ud)
{
	struct export_sink *s = ud;

	while (n) {
		ssize_t w = write(s->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			s->werr = errno;
			return 1;
		}
		p += w;
		n -= (size_t)w;
		s->written += (size_t)w;
	}
	return 0;
}

/* A retry must start the archive again: cut what was written, if we can. */
static int export_rewind(void *ud)
{
	struct export_sink *s = ud;

	if (!s->written)
		return 0;
	if (s->start < 0 || lseek(s->fd, s->start, SEEK_SET) < 0 ||
	    ftruncate(s->fd, s->start) < 0)
		return -1;
	s->written = 0;
	return 0;
}

int mb_export(struct mb_client *c, const struct mb_ident *who, int fd,
	      struct mb_err *err)
{
	struct export_sink sink = { fd, lseek(fd, 0, SEEK_CUR), 0, 0 };
	struct mb_call k = {
		.op = MB_OP_EXPORT, .what = "cannot export the workspace",
		.method = "GET", .route = "/containers/export", .who = who,
		.pool = true, .retry = MB_RETRY_READ, .budget_ms = 150000,
		.sink = export_write, .sink_ud = &sink, .rewind = export_rewind,
		.low_speed_secs = 90,
	};
	struct mb_http_resp resp;
	int r;

	mb_http_resp_init(&resp);
	r = mb_call_run(c, &k, &resp, err);
	if (!r && resp.stopped)
		r = mb_err_set(err, sink.werr ? sink.werr : EIO,
			       "cannot export the workspace: write failed: %s",
			       strerror(sink.werr ? sink.werr : EIO));
	mb_http_resp_release(&resp);
	return r;
}
