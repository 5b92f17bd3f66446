/* util.c: checked number/duration/time parsers, randomness, clocks and
 * back-off. Base64 and SHA-256 live in codec.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

int mb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int mb_parse_duration_ms(const char *s, uint64_t *out_ms)
{
	uint64_t whole = 0, frac = 0, frac_div = 1, mult, ms;
	const char *p = s;
	int digits = 0;

	if (!s)
		return -EINVAL;
	while (isdigit((unsigned char)*p)) {
		if (whole > UINT64_MAX / 10 - 10)
			return -EINVAL;
		whole = whole * 10 + (uint64_t)(*p++ - '0');
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (frac_div < 1000000000ull) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return -EINVAL;
	if (!*p || strcmp(p, "s") == 0)
		mult = 1000;
	else if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (strcmp(p, "m") == 0)
		mult = 60000;
	else if (strcmp(p, "h") == 0)
		mult = 3600000;
	else if (strcmp(p, "d") == 0)
		mult = 86400000;
	else
		return -EINVAL;
	if (whole > UINT64_MAX / mult / 2)
		return -EINVAL;
	ms = whole * mult + frac * mult / frac_div;
	*out_ms = ms;
	return 0;
}

static int digits_at(const char *s, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int mb_parse_iso8601(const char *s, time_t *sec, int *msec)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, mo, d, h, mi, se, ms = 0;
	struct tm tm;
	const char *p;
	time_t t;

	if (!s || strlen(s) < 20)
		return -EINVAL;
	if (digits_at(s, 4, &y) || s[4] != '-' || digits_at(s + 5, 2, &mo) ||
	    s[7] != '-' || digits_at(s + 8, 2, &d) || s[10] != 'T' ||
	    digits_at(s + 11, 2, &h) || s[13] != ':' ||
	    digits_at(s + 14, 2, &mi) || s[16] != ':' ||
	    digits_at(s + 17, 2, &se))
		return -EINVAL;
	p = s + 19;
	if (*p == '.') {
		int n = 0, scale = 100;

		p++;
		while (isdigit((unsigned char)*p)) {
			if (n < 3)
				ms += (*p - '0') * scale;
			scale /= 10;
			n++;
			p++;
		}
		if (!n)
			return -EINVAL;
	}
	if (strcmp(p, "Z") != 0)
		return -EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 ||
	    mi > 59 || se > 60)
		return -EINVAL;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	if (sec)
		*sec = t;
	if (msec)
		*msec = ms;
	return 0;
}

char *mb_next_line(char **text)
{
	char *line = *text;
	if (!line || !*line)
		return NULL;
	char *nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	*text = nl ? nl + 1 : NULL;
	return line;
}

long mb_frac_nsec(const char *d, size_t n)
{
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] < '0' || d[i] > '9')
			return -1;
		if (i < 9)
			v = v * 10 + (d[i] - '0');
	}
	for (size_t i = n; i < 9; i++)
		v *= 10;
	return v;
}

void mb_format_iso8601(time_t sec, int msec, char out[32])
{
	char tmp[96];
	struct tm tm;

	if (!gmtime_r(&sec, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
	{
		/* out of range: print the epoch rather than garbage */
		memset(&tm, 0, sizeof(tm));
		tm.tm_year = 70;
		tm.tm_mday = 1;
	}
	if (msec < 0 || msec > 999)
		msec = 0;
	snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, msec);
	snprintf(out, 32, "%.31s", tmp);
}

int mb_is_canonical_generation(const char *s)
{
	char again[32];
	time_t t;
	int ms;

	if (!s || strlen(s) != 24 || s[19] != '.')
		return 0;
	if (mb_parse_iso8601(s, &t, &ms))
		return 0;
	mb_format_iso8601(t, ms, again);
	return strcmp(again, s) == 0;
}

int mb_random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char tmp[64];
	size_t done = 0, i;

	while (done < n) {
		size_t want = n - done < sizeof(tmp) ? n - done : sizeof(tmp);
		ssize_t got = getrandom(tmp, want, 0);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (i = 0; i < (size_t)got; i++) {
			out[2 * (done + i)] = hex[tmp[i] >> 4];
			out[2 * (done + i) + 1] = hex[tmp[i] & 15];
		}
		done += (size_t)got;
	}
	out[2 * n] = '\0';
	return 0;
}

uint64_t mb_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void mb_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t random_u64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint64_t)ts.tv_nsec * 6364136223846793005ull + 1442695040888963407ull;
	}
	return v;
}

uint64_t mb_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms)
{
	uint64_t d = base_ms;
	unsigned i;

	for (i = 0; i < attempt && d < cap_ms; i++)
		d *= 2;
	if (d > cap_ms)
		d = cap_ms;
	if (d < 2)
		return d;
	return d / 2 + random_u64() % (d - d / 2 + 1);
}

int mb_mkdir_p(const char *dir, unsigned mode)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Length of the well-formed UTF-8 sequence at p (n bytes left), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF, as a strict
 * decoder (the service's) requires. */
size_t mb_utf8_seq_len(const unsigned char *p, size_t n)
{
	size_t len, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

int mb_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, l;

	while (i < n) {
		l = mb_utf8_seq_len(p + i, n - i);
		if (!l)
			return 0;
		i += l;
	}
	return 1;
}

int mb_write_file_whole(const char *path, const char *text, int durable)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text), off = 0;
	int rc = 0;
	while (off < len && !rc) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno != EINTR)
			rc = -errno;
		else if (w > 0)
			off += (size_t)w;
	}
	if (!rc && durable && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	if (!durable)
		return 0;
	/* the rename itself, through the directory */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	int dfd = open(slash ? (dir[0] ? dir : "/") : ".",
		       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}
