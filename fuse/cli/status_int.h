/* status_int.h: the inside of `mbfs --status`: status_facts.c (what the
 * control file says), used by status.c (how it is printed) and
 * status_wait.c (--wait and its progress line). Not for other modules. */
#ifndef MBFS_STATUS_INT_H
#define MBFS_STATUS_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* What the control file says, as `--status` shows it. The strings and
 * kept belong to the parsed document (never NULL; "" when absent). */
struct mbfs_status {
	const char *id, *created_at, *root, *mountpoint;
	const char *log_file;      /* "": the mount logs to its stderr */
	const char *kept_dir, *last_error;
	double pid;
	bool stopped;              /* the generation is gone */
	bool reported;             /* the mount reports write-back */
	bool waiting;              /* its batches cannot reach the sandbox */
	double inflight_ms;        /* the batch in flight, unanswered so long */
	double pending_files, pending_dirs, pending_removes, pending_bytes;
	double uploading_files, uploading_bytes, uploading_sent;
	double sent_files, sent_batches, sent_bytes, failed_files;
	const cJSON *kept;         /* [{"path","file","reason"}], or NULL */
	const cJSON *unsent;       /* an ended mount's record (unsent.h),
	                              or NULL */
};

/* The control file at path, read whole (malloc'd), or NULL with errno
 * set. */
char *mbfs_status_read(const char *path);
/* Read and parse the control file at path into *doc (the caller's, to
 * cJSON_Delete) and f. 0, -EINVAL when it is not JSON, or -errno. */
int mbfs_status_facts(const char *path, cJSON **doc, struct mbfs_status *f);
/* o's string member name, or "" (never NULL). */
const char *mbfs_status_str(const cJSON *o, const char *name);
/* b bytes for a person ("1.5 MiB") into out. */
void mbfs_status_human(double b, char *out, size_t n);

/* Have the mount at path (MOUNTPOINT mnt, for messages) send everything
 * it holds back, and wait; with stderr a terminal, a progress line there
 * meanwhile, erased at the end. 0; 1 when a file could not be sent; 2
 * when the mount cannot be asked (the message printed). */
int mbfs_status_wait(const char *path, const char *mnt);

/* `--status ARG` where ARG is no mount: a cache directory, where a mount
 * was, or a container id (default cache directories), whose ended mount
 * left an unsent record (unsent.h): printed (json: {"unsent": record}),
 * and 1. -1 when none is found (nothing printed). status_unsent.c. */
int mbfs_status_unsent(const char *arg, bool json);

#endif
