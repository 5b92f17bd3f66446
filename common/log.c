/* log.c: the levelled logger (stderr, syslog or a file). Each call writes
 * one line with a single write(2) so lines from several threads never
 * interleave; in a file each line starts with the UTC time and the pid. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static char prog_name[32] = "mb";
static volatile int cur_level = MB_LOG_WARN;
static volatile int use_syslog;
static volatile int log_fd = -1;     /* a log file, when one is used */
static char log_path[4096];          /* its path; set before log_fd */

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

int mb_log_syslog_available(void)
{
	/* syslog(3) drops lines silently when nothing listens on /dev/log
	 * (containers, minimal machines): look before trusting it */
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

int mb_log_use_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		      O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	int old = log_fd;
	snprintf(log_path, sizeof(log_path), "%s", path);
	log_fd = fd;
	use_syslog = 0;
	if (old >= 0)
		close(old);
	return 0;
}

const char *mb_log_file(void)
{
	return log_fd >= 0 && !use_syslog ? log_path : NULL;
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
	if (log_fd >= 0) {
		char when[32];
		struct tm tm;
		time_t now = time(NULL);
		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		n = snprintf(line, sizeof(line), "%s %s[%ld]: %s: ", when,
			     prog_name, (long)getpid(), names[level]);
	} else {
		n = snprintf(line, sizeof(line), "%s: %s: ", prog_name,
			     names[level]);
	}
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
	if (write(log_fd >= 0 ? log_fd : STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}
