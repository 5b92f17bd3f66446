/* unit.h: the few checks the parsers' unit tests share (tests/unit/). A
 * test program calls its cases from main() and returns unit_end(). */
#ifndef MB_UNIT_H
#define MB_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed, unit_checked;

#define CHECK(cond) do {						\
	unit_checked++;							\
	if (!(cond)) {							\
		unit_failed++;						\
		fprintf(stderr, "%s:%d: check failed: %s\n",		\
			__FILE__, __LINE__, #cond);			\
	}								\
} while (0)

#define CHECK_INT(got, want) do {					\
	long long g_ = (long long)(got), w_ = (long long)(want);	\
	unit_checked++;							\
	if (g_ != w_) {							\
		unit_failed++;						\
		fprintf(stderr, "%s:%d: %s is %lld, want %lld\n",	\
			__FILE__, __LINE__, #got, g_, w_);		\
	}								\
} while (0)

#define CHECK_STR(got, want) do {					\
	const char *g_ = (got), *w_ = (want);				\
	unit_checked++;							\
	if (!g_ || strcmp(g_, w_)) {					\
		unit_failed++;						\
		fprintf(stderr, "%s:%d: %s is '%s', want '%s'\n",	\
			__FILE__, __LINE__, #got, g_ ? g_ : "(null)", w_); \
	}								\
} while (0)

/* A seed of tests/fuzz/seeds/ (a real output), NUL-terminated after
 * *len bytes; exits when it cannot be read. */
static inline char *unit_seed(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof(path), "tests/fuzz/seeds/%s", name);
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;
	if (f && fseek(f, 0, SEEK_END) == 0) {
		long sz = ftell(f);
		if (sz >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		    (buf = malloc((size_t)sz + 1)))
			n = fread(buf, 1, (size_t)sz, f);
	}
	if (!buf) {
		fprintf(stderr, "cannot read the seed '%s' (run from the "
			"top of the tree)\n", path);
		exit(2);
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* A malloc'd copy of p[0, n), NUL-terminated: a cut input that ends where
 * it ends (ASan sees a read past it). */
static inline char *unit_dup(const char *p, size_t n)
{
	char *c = malloc(n + 1);
	if (!c)
		exit(2);
	memcpy(c, p, n);
	c[n] = '\0';
	return c;
}

static inline int unit_end(const char *name)
{
	if (unit_failed)
		fprintf(stderr, "%s: %d of %d checks failed\n", name,
			unit_failed, unit_checked);
	else
		printf("%s: %d checks passed\n", name, unit_checked);
	return unit_failed ? 1 : 0;
}

#endif
