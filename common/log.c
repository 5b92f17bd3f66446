/* log.c: the levelled logger (stderr or syslog). Each call writes one line
 * with a single write(2) so lines from several threads never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"

static char prog_name[32] = "mb";
static volatile int cur_level = MB_LOG_WARN;
static volatile int use_syslog;

void mb_log_init(const char *prog, enum mb_log_level level)
{
	if (prog)
		snprintf(prog_name, sizeof(prog_name), "%s", prog);
	cur_level = level;
}

void mb_log_set_level(enum mb_log_level level)
{
	cur_level = level;
}

enum mb_log_level mb_log_get_level(void)
{
	return (enum mb_log_level)cur_level;
}

void mb_log_use_syslog(int on)
{
	if (on && !use_syslog)
		openlog(prog_name, LOG_PID, LOG_DAEMON);
	use_syslog = on;
}

void mb_log(enum mb_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[2048];
	va_list ap;
	int n, m;

	if ((int)level > cur_level || (int)level < 0 || level > MB_LOG_DEBUG)
		return;
	va_start(ap, fmt);
	if (use_syslog) {
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		syslog(prio[level], "%s", line);
		return;
	}
	n = snprintf(line, sizeof(line), "%s: %s: ", prog_name, names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}
