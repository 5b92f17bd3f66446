/* util.h: small checked parsers and helpers shared by both programs. */
#ifndef MB_UTIL_H
#define MB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Parse a whole decimal string into [min,max]; 0 or -EINVAL/-ERANGE. */
int mb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Parse a duration "1.5", "30s", "500ms", "2m", "1h" into milliseconds
 * (a bare number means seconds, as GNU timeout). 0 or -EINVAL. */
int mb_parse_duration_ms(const char *s, uint64_t *out_ms);

/* Parse "YYYY-MM-DDTHH:MM:SS(.mmm)Z" into seconds and milliseconds. */
int mb_parse_iso8601(const char *s, time_t *sec, int *msec);

/* The next line of *text, cut at its newline in place (*text moves past
 * it), or NULL at the end. */
char *mb_next_line(char **text);

/* The nanoseconds of the n digits of a decimal fraction ("25" is
 * 250000000; digits past the ninth are cut), or -1 when they are not all
 * digits. */
long mb_frac_nsec(const char *d, size_t n);

/* Format t (UTC) with ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" into out[32]. */
void mb_format_iso8601(time_t sec, int msec, char out[32]);

/* 1 when s is exactly the canonical ISO-ms form the API requires. */
int mb_is_canonical_generation(const char *s);

/* Fill out with n random bytes as 2n lowercase hex chars + NUL. 0 or -errno. */
int mb_random_hex(char *out, size_t n);

/* Monotonic clock in milliseconds. */
uint64_t mb_now_ms(void);

/* mkdir -p: create dir and its missing parents with mode (existing ones are
 * left as they are). 0 or -errno. */
int mb_mkdir_p(const char *dir, unsigned mode);

/* Write text to path whole, through path.tmp (mode 0600) and a rename: a
 * reader sees the old text or the new one. durable: the file and the
 * rename are fsynced, so a power cut leaves one of them too. 0 or
 * -errno (nothing left behind). */
int mb_write_file_whole(const char *path, const char *text, int durable);

/* Sleep ms milliseconds, restarting on EINTR. */
void mb_sleep_ms(uint64_t ms);

/* Capped jittered back-off for attempt (0-based): min(cap, base*2^attempt),
 * then a uniformly random value in [d/2, d]. */
uint64_t mb_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms);

/* Base64 encode/decode; the result is malloc'd and NUL-terminated.
 * decode ignores whitespace and fails with -EINVAL on other bad input. */
int mb_base64_encode(const void *in, size_t len, char **out, size_t *out_len);
int mb_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len);

/* 1 when the n bytes at s are well-formed UTF-8 (strict: no overlong
 * forms, surrogates or code points past U+10FFFF), else 0. */
int mb_utf8_valid(const char *s, size_t n);

/* Length of the well-formed UTF-8 sequence at p (n > 0 bytes left), or 0
 * when it is not one (the strict decoding of mb_utf8_valid). */
size_t mb_utf8_seq_len(const unsigned char *p, size_t n);

/* SHA-256 of a buffer as 64 lowercase hex chars + NUL. */
void mb_sha256_hex(const void *data, size_t len, char out[65]);

/* Incremental SHA-256 (libcrypto's state, opaque; nothing to release). */
struct mb_sha256 { _Alignas(8) unsigned char ctx[128]; };
void mb_sha256_init(struct mb_sha256 *s);
void mb_sha256_update(struct mb_sha256 *s, const void *data, size_t len);
void mb_sha256_final_hex(struct mb_sha256 *s, char out[65]);

#endif
