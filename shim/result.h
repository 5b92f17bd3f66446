/* result.h: how mbexec reports: error lines and the --json object. */
#ifndef MBX_RESULT_H
#define MBX_RESULT_H

#include <stdbool.h>

#include "shim/mbexec.h"

/* Print "mbexec: MESSAGE" on stderr and remember it for --json. */
void mbx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The error for a sandbox that is gone (container_not_running): names it
 * and says what to do; what: what became of the command. */
void mbx_gone(const struct mbx_run *r, const char *what);

/* A line on stderr that is not an error ("mbexec: note: ..."). */
void mbx_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The terminal is in raw mode (pump.c says so): message lines then end
 * in \r\n on a terminal. */
void mbx_messages_raw(bool raw);

/* The last message given to mbx_error() ("" if none). */
const char *mbx_last_error(void);

/* Print the --json object for r on stdout: exitCode (exit_status, the
 * status mbexec exits with, when has_status, else null), signal, timedOut,
 * stdout, stderr, stdoutLossy/stderrLossy (a byte that is not UTF-8 became
 * U+FFFD), truncation flags (capture over MBX_JSON_CAP), executionTimeMs,
 * strategy, remoteId, and error: always when !has_status (error, else a
 * generic sentence), else when error is not NULL. 0 or -1 when stdout
 * failed. */
int mbx_print_json(const struct mbx_run *r, const char *strategy,
		   bool has_status, int exit_status, const char *error);

#endif
