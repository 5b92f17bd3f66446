/* buf.c: growable byte buffer with a maximum size (see buf.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

void mb_buf_init(struct mb_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void mb_buf_release(struct mb_buf *b)
{
	size_t max = b->max;

	free(b->data);
	mb_buf_init(b, max);
}

void mb_buf_reset(struct mb_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Make room for n more bytes plus the NUL. */
static int grow(struct mb_buf *b, size_t n)
{
	size_t need, cap;
	char *p;

	if (n > b->max || b->len > b->max - n)
		return -E2BIG;
	if (b->len + n + 1 < b->len + n)
		return -ENOMEM;
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need) {
		if (cap > ((size_t)-1) / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int mb_buf_append(struct mb_buf *b, const void *p, size_t n)
{
	int r = grow(b, n);

	if (r)
		return r;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int mb_buf_appends(struct mb_buf *b, const char *s)
{
	return mb_buf_append(b, s, strlen(s));
}

int mb_buf_appendf(struct mb_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	r = grow(b, (size_t)n);
	if (r)
		return r;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

char *mb_buf_detach(struct mb_buf *b, size_t *len)
{
	char *p = b->data;

	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = p ? b->len : 0;
	mb_buf_init(b, b->max);
	return p;
}

int mb_buf_append_shq(struct mb_buf *b, const char *s)
{
	size_t old = b->len;
	int r = 0;

	r = mb_buf_append(b, "'", 1);
	for (; !r && *s; s++) {
		if (*s == '\'')
			r = mb_buf_append(b, "'\\''", 4);
		else
			r = mb_buf_append(b, s, 1);
	}
	if (!r)
		r = mb_buf_append(b, "'", 1);
	if (r) {
		/* keep the promise that a failed append changes nothing */
		b->len = old;
		if (b->data)
			b->data[old] = '\0';
	}
	return r;
}
