/* log.h: one levelled, format-checked logger for both programs.
 *
 * Messages go to stderr, to syslog once mb_log_use_syslog() is called (a
 * daemonised mount with a syslog socket), or to a file once
 * mb_log_use_file() is (-o log_file, or a daemonised mount without
 * syslog). Never pass a credential, a request body or file contents.
 * Thread-safe: each call writes one whole line.
 */
#ifndef MB_LOG_H
#define MB_LOG_H

enum mb_log_level { MB_LOG_ERR = 0, MB_LOG_WARN, MB_LOG_INFO, MB_LOG_DEBUG };

/* prog: program name prefix ("mbfs"); level: the most verbose level shown. */
void mb_log_init(const char *prog, enum mb_log_level level);
void mb_log_set_level(enum mb_log_level level);
enum mb_log_level mb_log_get_level(void);
void mb_log_use_syslog(int on);
/* 1 when a syslog daemon listens on /dev/log, else 0. */
int mb_log_syslog_available(void);
/* From now on append lines (with time and pid) to path, created 0600,
 * instead of stderr or syslog. 0 or -errno (the previous target stays). */
int mb_log_use_file(const char *path);
/* The file lines go to (the path given to mb_log_use_file), or NULL when
 * they go to stderr or syslog. Set once at startup: read it afterwards. */
const char *mb_log_file(void);

void mb_log(enum mb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
