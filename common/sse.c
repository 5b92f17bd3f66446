/* sse.c: incremental text/event-stream parser (see sse.h). */
#include <errno.h>
#include <string.h>

#include "common/sse.h"

void mb_sse_init(struct mb_sse *p, size_t max_line, mb_sse_frame_fn on_frame,
		 mb_sse_comment_fn on_comment, void *ud)
{
	memset(p, 0, sizeof(*p));
	mb_buf_init(&p->line, max_line);
	mb_buf_init(&p->data, max_line);
	p->on_frame = on_frame;
	p->on_comment = on_comment;
	p->ud = ud;
}

void mb_sse_release(struct mb_sse *p)
{
	mb_buf_release(&p->line);
	mb_buf_release(&p->data);
}

static void clear_frame(struct mb_sse *p)
{
	mb_buf_reset(&p->data);
	p->event[0] = '\0';
	p->id[0] = '\0';
	p->has_id = false;
	p->has_data = false;
}

void mb_sse_reset(struct mb_sse *p)
{
	mb_buf_reset(&p->line);
	clear_frame(p);
	p->after_cr = false;
}

static int dispatch(struct mb_sse *p)
{
	struct mb_sse_frame f;
	int r = 0;

	if (p->has_data && p->on_frame) {
		f.event = p->event;
		f.id = p->has_id ? p->id : NULL;
		f.data = p->data.data ? p->data.data : "";
		f.data_len = p->data.len;
		r = p->on_frame(&f, p->ud);
	}
	clear_frame(p);
	return r;
}

static void copy_field(char *dst, size_t size, const char *v, size_t n)
{
	if (n >= size)
		n = size - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

/* One complete line (without its terminator). */
static int line(struct mb_sse *p, const char *s, size_t n)
{
	const char *colon, *v;
	size_t fn, vn;
	int r;

	if (n == 0)
		return dispatch(p);
	if (s[0] == ':')
		return p->on_comment ? p->on_comment(s + 1, n - 1, p->ud) : 0;
	colon = memchr(s, ':', n);
	fn = colon ? (size_t)(colon - s) : n;
	v = colon ? colon + 1 : s + n;
	vn = n - fn - (colon ? 1 : 0);
	if (vn && *v == ' ') {
		v++;
		vn--;
	}
	if (fn == 4 && memcmp(s, "data", 4) == 0) {
		if (p->has_data && (r = mb_buf_append(&p->data, "\n", 1)))
			return r;
		if ((r = mb_buf_append(&p->data, v, vn)))
			return r;
		p->has_data = true;
	} else if (fn == 5 && memcmp(s, "event", 5) == 0) {
		copy_field(p->event, sizeof(p->event), v, vn);
	} else if (fn == 2 && memcmp(s, "id", 2) == 0) {
		if (!memchr(v, '\0', vn)) {
			copy_field(p->id, sizeof(p->id), v, vn);
			p->has_id = true;
		}
	}
	/* "retry:" and unknown fields are ignored */
	return 0;
}

int mb_sse_feed(struct mb_sse *p, const char *buf, size_t n)
{
	size_t i, start = 0;
	int r;

	for (i = 0; i < n; i++) {
		char ch = buf[i];

		if (ch != '\n' && ch != '\r') {
			p->after_cr = false;
			continue;
		}
		if (ch == '\n' && p->after_cr && i == start) {
			/* the LF of a CRLF split across or within chunks */
			p->after_cr = false;
			start = i + 1;
			continue;
		}
		p->after_cr = ch == '\r';
		if (p->line.len) {
			if ((r = mb_buf_append(&p->line, buf + start, i - start)))
				return r;
			r = line(p, p->line.data, p->line.len);
			mb_buf_reset(&p->line);
		} else {
			r = line(p, buf + start, i - start);
		}
		start = i + 1;
		if (r)
			return r;
	}
	if (start < n) {
		r = mb_buf_append(&p->line, buf + start, n - start);
		if (r)
			return r;
	}
	return 0;
}
