/* log.h: one levelled, format-checked logger for both programs.
 *
 * Messages go to stderr (or syslog once mb_log_use_syslog() is called, as a
 * daemonised mount does). Never pass a credential, a request body or file
 * contents. Thread-safe: each call writes one whole line.
 */
#ifndef MB_LOG_H
#define MB_LOG_H

enum mb_log_level { MB_LOG_ERR = 0, MB_LOG_WARN, MB_LOG_INFO, MB_LOG_DEBUG };

/* prog: program name prefix ("mbfs"); level: the most verbose level shown. */
void mb_log_init(const char *prog, enum mb_log_level level);
void mb_log_set_level(enum mb_log_level level);
enum mb_log_level mb_log_get_level(void);
void mb_log_use_syslog(int on);

void mb_log(enum mb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
