/* when.c: deadlines for people (see when.h). */
#include <stdio.h>

#include "fuse/cli/when.h"

void mbfs_when_span(int64_t ms, char *out, size_t n)
{
	int64_t s = ms > 0 ? ms / 1000 : 0;
	if (s < 60)
		snprintf(out, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, n, "%lldm", (long long)(s / 60));
	else if (s < 86400 && (s % 3600) / 60)
		snprintf(out, n, "%lldh %lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else if (s < 86400)
		snprintf(out, n, "%lldh", (long long)(s / 3600));
	else if ((s % 86400) / 3600)
		snprintf(out, n, "%lldd %lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
	else
		snprintf(out, n, "%lldd", (long long)(s / 86400));
}

void mbfs_when_deadline(time_t t, time_t now, char *out, size_t n)
{
	struct tm at, today;
	char clock[32], left[32];
	if (!localtime_r(&t, &at) || !localtime_r(&now, &today)) {
		snprintf(out, n, "?");
		return;
	}
	if (at.tm_year == today.tm_year && at.tm_yday == today.tm_yday)
		strftime(clock, sizeof(clock), "%H:%M", &at);
	else
		strftime(clock, sizeof(clock), "%Y-%m-%d %H:%M", &at);
	if (t <= now) {
		snprintf(out, n, "%s (passed)", clock);
		return;
	}
	mbfs_when_span((int64_t)(t - now) * 1000, left, sizeof(left));
	snprintf(out, n, "%s (in %s)", clock, left);
}

void mbfs_when_create_lines(time_t expires, time_t now, long long idle_ms,
			    uint64_t keepalive_ms, char *out, size_t n)
{
	char hard[64], span[32], every[32];
	int len;
	if (expires) {
		mbfs_when_deadline(expires, now, hard, sizeof(hard));
		len = snprintf(out, n, "hard deadline: %s; the sandbox and its "
			       "files are gone then\n", hard);
	} else {
		len = snprintf(out, n, "hard deadline: not reported by the "
			       "service\n");
	}
	if (len < 0 || (size_t)len >= n)
		return;
	out += len;
	n -= (size_t)len;
	mbfs_when_span(idle_ms, span, sizeof(span));
	mbfs_when_span((int64_t)keepalive_ms, every, sizeof(every));
	if (idle_ms <= 0)
		snprintf(out, n, "idle deadline: not reported by the service\n");
	else if (keepalive_ms)
		snprintf(out, n, "idle deadline: after %s without requests (this "
			 "mount makes one every %s)\n", span, every);
	else
		snprintf(out, n, "idle deadline: after %s without requests\n",
			 span);
}
