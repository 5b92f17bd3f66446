/* test_sse.c: the SSE stream parser (common/sse.c). */
#include <errno.h>

#include "common/sse.h"
#include "tests/unit/unit.h"

struct seen {
	int frames, comments;
	char events[256];      /* "stdout/1,stderr/2,status/-," */
	size_t data;
};

static int frame(const struct mb_sse_frame *f, void *ud)
{
	struct seen *s = ud;
	size_t l = strlen(s->events);
	snprintf(s->events + l, sizeof(s->events) - l, "%s/%s,", f->event,
		 f->id ? f->id : "-");
	CHECK_INT(strlen(f->data), f->data_len);
	s->data += f->data_len;
	s->frames++;
	return 0;
}

static int comment(const char *text, size_t len, void *ud)
{
	(void)text;
	(void)len;
	((struct seen *)ud)->comments++;
	return 0;
}

/* Feed t[0, n) cut at k. */
static int feed(const char *t, size_t n, size_t k, size_t max,
		struct seen *s)
{
	struct mb_sse p;
	memset(s, 0, sizeof(*s));
	mb_sse_init(&p, max, frame, comment, s);
	int rc = mb_sse_feed(&p, t, k);
	if (!rc)
		rc = mb_sse_feed(&p, t + k, n - k);
	mb_sse_release(&p);
	return rc;
}

static void real(void)
{
	size_t len;
	struct seen whole, s;
	char *t = unit_seed("sse/events", &len);
	CHECK_INT(feed(t, len, 0, 4096, &whole), 0);
	CHECK_INT(whole.frames, 3);
	CHECK_INT(whole.comments, 1);
	CHECK_STR(whole.events, "stdout/1,stderr/2,status/-,");
	/* cut anywhere: the same frames */
	for (size_t k = 0; k <= len; k++) {
		CHECK_INT(feed(t, len, k, 4096, &s), 0);
		CHECK_STR(s.events, whole.events);
		CHECK_INT(s.data, whole.data);
	}
	/* the stream cut short: the frames before it */
	for (size_t k = 0; k < len; k++) {
		CHECK_INT(feed(t, k, k / 2, 4096, &s), 0);
		CHECK(s.frames <= 3);
	}
	/* CRLF and CR line ends read as LF */
	char *crlf = malloc(2 * len + 1), *cr = malloc(len + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (t[i] == '\n')
			crlf[n++] = '\r';
		crlf[n++] = t[i];
		cr[i] = t[i] == '\n' ? '\r' : t[i];
	}
	for (size_t k = 0; k <= n; k += 7) {
		CHECK_INT(feed(crlf, n, k, 4096, &s), 0);
		CHECK_STR(s.events, whole.events);
	}
	CHECK_INT(feed(cr, len, len / 2, 4096, &s), 0);
	CHECK_STR(s.events, whole.events);
	free(crlf);
	free(cr);
	/* a line or a frame past max_line: -E2BIG */
	CHECK_INT(feed(t, len, 3, 64, &s), -E2BIG);
	CHECK_INT(feed(t, len, 0, 64, &s), -E2BIG);
	free(t);
}

static void odd(void)
{
	struct seen s;
	static const char t[] = "event: " "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nid\nretry: 5\n"
		"bogus\ndata\n\n\n\n:\ndata:x\ndata:y\n\n";
	CHECK_INT(feed(t, sizeof(t) - 1, 5, 4096, &s), 0);
	CHECK_INT(s.frames, 2);
	CHECK_INT(s.comments, 1);
	CHECK_INT(s.data, 3);      /* "" and "x\ny" */
}

int main(void)
{
	real();
	odd();
	return unit_end("sse");
}
