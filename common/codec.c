/* codec.c: base64 (RFC 4648, padded) and SHA-256 through libcrypto.
 * libcrypto rather than our own: large uploads hash every byte, and its
 * SHA-256 uses the CPU's SHA extensions (several times faster). */
/* the SHA256_* calls are deprecated in OpenSSL 3 for EVP, which allocates
 * a context per hash; these need no allocation and cannot fail */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "common/util.h"

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int mb_base64_encode(const void *in, size_t len, char **out, size_t *out_len)
{
	const unsigned char *p = in;
	size_t n = (len + 2) / 3 * 4, i, o = 0;
	char *s;

	if (len > ((size_t)-1) / 2)
		return -ENOMEM;
	s = malloc(n + 1);
	if (!s)
		return -ENOMEM;
	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];

		s[o++] = b64[v >> 18 & 63];
		s[o++] = b64[v >> 12 & 63];
		s[o++] = b64[v >> 6 & 63];
		s[o++] = b64[v & 63];
	}
	if (i < len) {
		unsigned v = (unsigned)p[i] << 16;

		if (i + 1 < len)
			v |= (unsigned)p[i + 1] << 8;
		s[o++] = b64[v >> 18 & 63];
		s[o++] = b64[v >> 12 & 63];
		s[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		s[o++] = '=';
	}
	s[o] = '\0';
	*out = s;
	if (out_len)
		*out_len = o;
	return 0;
}

static int b64_value(int c)
{
	const char *p;

	if (!c)
		return -1;
	p = strchr(b64, c);
	return p ? (int)(p - b64) : -1;
}

int mb_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
	unsigned char *o;
	unsigned acc = 0;
	size_t i, n = 0;
	int bits = 0, pad = 0, r = -EINVAL;

	o = malloc(len / 4 * 3 + 4);
	if (!o)
		return -ENOMEM;
	for (i = 0; i < len; i++) {
		int c = (unsigned char)in[i], v;

		if (isspace(c))
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		if (pad)
			goto out;  /* data after padding */
		v = b64_value(c);
		if (v < 0)
			goto out;
		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[n++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* leftover bits must be a proper tail: 2 or 4 bits, and zero */
	if (bits == 6 || pad > 2 || acc != 0)
		goto out;
	o[n] = '\0';
	*out = o;
	if (out_len)
		*out_len = n;
	o = NULL;
	r = 0;
out:
	free(o);
	return r;
}

_Static_assert(sizeof(SHA256_CTX) <= sizeof(((struct mb_sha256 *)0)->ctx),
	       "struct mb_sha256 too small for SHA256_CTX");

void mb_sha256_init(struct mb_sha256 *s)
{
	SHA256_Init((SHA256_CTX *)(void *)s->ctx);
}

void mb_sha256_update(struct mb_sha256 *s, const void *data, size_t len)
{
	SHA256_Update((SHA256_CTX *)(void *)s->ctx, data, len);
}

void mb_sha256_final_hex(struct mb_sha256 *s, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256_Final(md, (SHA256_CTX *)(void *)s->ctx);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

void mb_sha256_hex(const void *data, size_t len, char out[65])
{
	struct mb_sha256 s;

	mb_sha256_init(&s);
	mb_sha256_update(&s, data, len);
	mb_sha256_final_hex(&s, out);
}
