/* buf.h: a growable byte buffer with a maximum size.
 *
 * Invariants: data is NUL-terminated after len bytes whenever data != NULL
 * (so text can be used as a C string); len <= max. A failed append leaves the
 * buffer unchanged. The buffer owns data; mb_buf_release() frees it and
 * re-initialises the struct. mb_buf_detach() hands data to the caller.
 */
#ifndef MB_BUF_H
#define MB_BUF_H

#include <stddef.h>

struct mb_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;   /* appends beyond this fail with -E2BIG */
};

#define MB_BUF_UNLIMITED ((size_t)-1)

void mb_buf_init(struct mb_buf *b, size_t max);
void mb_buf_release(struct mb_buf *b);
void mb_buf_reset(struct mb_buf *b);              /* len = 0, keeps memory */
int mb_buf_append(struct mb_buf *b, const void *p, size_t n); /* 0 / -ENOMEM / -E2BIG */
int mb_buf_appends(struct mb_buf *b, const char *s);
int mb_buf_appendf(struct mb_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
char *mb_buf_detach(struct mb_buf *b, size_t *len); /* caller frees; b re-initialised */

/* Append s single-quoted for /bin/sh ('a'\''b'), safe for any bytes but NUL. */
int mb_buf_append_shq(struct mb_buf *b, const char *s);

#endif
