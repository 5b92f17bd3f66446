/* sse.h (internal to common/): an incremental text/event-stream parser.
 *
 * Feed it bytes as they arrive; it calls on_frame for each frame (ended by
 * a blank line) that holds data, and on_comment for each ':' line. Lines end
 * in LF, CRLF or CR. Multi-line data is joined with "\n". "id:" applies to
 * its own frame only (the API puts no id on status frames).
 */
#ifndef MB_SSE_H
#define MB_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct mb_sse_frame {
	const char *event;   /* "" when no event: line ("message") */
	const char *id;      /* NULL when the frame had no id: line */
	const char *data;    /* NUL-terminated, data_len bytes */
	size_t data_len;
};

/* Return 0 to go on; a non-zero value stops mb_sse_feed() with it. */
typedef int (*mb_sse_frame_fn)(const struct mb_sse_frame *f, void *ud);
typedef int (*mb_sse_comment_fn)(const char *text, size_t len, void *ud);

struct mb_sse {
	struct mb_buf line;
	struct mb_buf data;
	char event[64];
	char id[64];
	bool has_id;
	bool has_data;
	bool after_cr;       /* last byte was CR: a following LF is no line */
	mb_sse_frame_fn on_frame;
	mb_sse_comment_fn on_comment;
	void *ud;
};

/* max_line caps one line and one frame's data (-E2BIG beyond). */
void mb_sse_init(struct mb_sse *p, size_t max_line, mb_sse_frame_fn on_frame,
		 mb_sse_comment_fn on_comment, void *ud);
void mb_sse_release(struct mb_sse *p);

/* Forget a partial line or frame (a new connection starts). */
void mb_sse_reset(struct mb_sse *p);

/* Parse n bytes. 0, a callback's non-zero value, or -E2BIG/-ENOMEM. */
int mb_sse_feed(struct mb_sse *p, const char *buf, size_t n);

#endif
