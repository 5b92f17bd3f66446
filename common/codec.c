/* codec.c: base64 (RFC 4648, padded) and a small SHA-256 (FIPS 180-4).
 * No OpenSSL: these are only used for hashes in tests and lock-file names. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) ((x) >> (n) | (x) << (32 - (n)))

static void compress(uint32_t h[8], const unsigned char blk[64])
{
	uint32_t w[64], a, b, c, d, e, f, g, k, t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 |
		       (uint32_t)blk[4 * i + 2] << 8 | blk[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3];
	e = h[4]; f = h[5]; g = h[6]; k = h[7];
	for (i = 0; i < 64; i++) {
		t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
		     K[i] + w[i];
		t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		k = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d;
	h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void mb_sha256_init(struct mb_sha256 *s)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, iv, sizeof(iv));
	s->nbytes = 0;
	s->blen = 0;
}

void mb_sha256_update(struct mb_sha256 *s, const void *data, size_t len)
{
	const unsigned char *p = data;

	s->nbytes += len;
	while (len) {
		size_t take = 64 - s->blen;

		if (take > len)
			take = len;
		memcpy(s->blk + s->blen, p, take);
		s->blen += take;
		p += take;
		len -= take;
		if (s->blen == 64) {
			compress(s->h, s->blk);
			s->blen = 0;
		}
	}
}

void mb_sha256_final_hex(struct mb_sha256 *s, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t bits = s->nbytes * 8;
	unsigned char pad[72];
	size_t padlen = (s->blen < 56 ? 56 : 120) - s->blen;
	int i;

	memset(pad, 0, sizeof(pad));
	pad[0] = 0x80;
	for (i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
	mb_sha256_update(s, pad, padlen + 8);
	for (i = 0; i < 32; i++) {
		unsigned char byte = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));

		out[2 * i] = hex[byte >> 4];
		out[2 * i + 1] = hex[byte & 15];
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
