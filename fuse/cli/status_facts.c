/* status_facts.c: what a mount's control file says, read for `mbfs
 * --status` and its --wait (status_int.h); and bytes for a person. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ident.h"
#include "fuse/cli/status_int.h"

char *mbfs_status_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	for (ssize_t r = 1; buf && r > 0;) {
		if (len == cap) {
			char *nb = realloc(buf, 2 * cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				errno = ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			r = 1;
		else if (r < 0) {
			free(buf);
			buf = NULL;
		} else {
			len += (size_t)r;
		}
	}
	close(fd);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

const char *mbfs_status_str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) && v->valuestring ? v->valuestring : "";
}

int mbfs_status_facts(const char *path, cJSON **doc, struct mbfs_status *f)
{
	char *text = mbfs_status_read(path);
	if (!text)
		return -errno;
	cJSON *d = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(d)) {
		cJSON_Delete(d);
		return -EINVAL;
	}
	const cJSON *wb = cJSON_GetObjectItemCaseSensitive(d, "writeback");
	const cJSON *kept = cJSON_GetObjectItemCaseSensitive(d, "kept");
	memset(f, 0, sizeof(*f));
	f->id = mbfs_status_str(d, "id");
	f->created_at = mbfs_status_str(d, "createdAt");
	f->root = mbfs_status_str(d, "root");
	f->mountpoint = mbfs_status_str(d, "mountpoint");
	f->pid = num(d, "pid");
	f->log_file = mbfs_status_str(d, "logFile");
	f->kept_dir = mbfs_status_str(d, "keptDir");
	f->stopped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "stopped"));
	f->reported = cJSON_IsObject(wb);
	f->pending_files = num(wb, "pendingFiles");
	f->pending_dirs = num(wb, "pendingDirs");
	f->pending_removes = num(wb, "pendingRemoves");
	f->pending_bytes = num(wb, "pendingBytes");
	f->uploading_files = num(wb, "uploadingFiles");
	f->uploading_bytes = num(wb, "uploadingBytes");
	f->uploading_sent = num(wb, "uploadingSentBytes");
	f->sent_files = num(wb, "sentFiles");
	f->sent_batches = num(wb, "sentBatches");
	f->sent_bytes = num(wb, "sentBytes");
	f->failed_files = num(wb, "failedFiles");
	f->waiting = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(wb, "waiting"));
	f->inflight_ms = num(wb, "inFlightMs");
	f->last_error = mbfs_status_str(wb, "lastError");
	f->kept = cJSON_IsArray(kept) ? kept : NULL;
	const cJSON *uns = cJSON_GetObjectItemCaseSensitive(d, "unsent");
	f->unsent = cJSON_IsObject(uns) ? uns : NULL;
	*doc = d;
	return 0;
}

void mbfs_status_human(double b, char *out, size_t n)
{
	if (b < 1024)
		snprintf(out, n, "%.0f byte%s", b, b == 1 ? "" : "s");
	else if (b < 1048576)
		snprintf(out, n, "%.1f KiB", b / 1024);
	else if (b < 1073741824)
		snprintf(out, n, "%.1f MiB", b / 1048576);
	else
		snprintf(out, n, "%.2f GiB", b / 1073741824);
}
