/* fuzz_sse.c: the SSE stream parser (common/sse.c), fed in two pieces
 * cut where the first byte says, then reset and fed whole. */
#include "common/sse.h"
#include "tests/fuzz/fuzz.h"

static int frame(const struct mb_sse_frame *f, void *ud)
{
	*(size_t *)ud += f->data_len + strlen(f->event) +
			 (f->id ? strlen(f->id) : 0);
	return 0;
}

static int comment(const char *text, size_t len, void *ud)
{
	(void)text;
	*(size_t *)ud += len;
	return 0;
}

FUZZ_TEXT(s, n)
{
	struct mb_sse p;
	size_t seen = 0, cut = n ? (unsigned char)s[0] % (n + 1) : 0;
	mb_sse_init(&p, 256, frame, comment, &seen);
	if (!mb_sse_feed(&p, s, cut))
		mb_sse_feed(&p, s + cut, n - cut);
	mb_sse_reset(&p);
	mb_sse_feed(&p, s, n);
	mb_sse_release(&p);
}
