/* status.c: `mbfs --status` (see status.h). */
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
#include "fuse/status.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "mbfs: %s\nusage: mbfs --status [--wait] MOUNTPOINT\n",
		msg);
	return 2;
}

/* The control file of mountpoint, read whole (malloc'd), or NULL with
 * errno set. */
static char *read_control(const char *path)
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

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) && v->valuestring ? v->valuestring : "";
}

static void human(double b, char *out, size_t n)
{
	if (b < 1024)
		snprintf(out, n, "%.0f bytes", b);
	else if (b < 1048576)
		snprintf(out, n, "%.1f KiB", b / 1024);
	else
		snprintf(out, n, "%.1f MiB", b / 1048576);
}

static void print_status(const cJSON *doc)
{
	const cJSON *wb = cJSON_GetObjectItemCaseSensitive(doc, "writeback");
	const cJSON *kept = cJSON_GetObjectItemCaseSensitive(doc, "kept");
	char b[64];
	printf("mount:   %s@%s:%s on %s (pid %.0f)\n", str(doc, "id"),
	       str(doc, "createdAt"), str(doc, "root"), str(doc, "mountpoint"),
	       num(doc, "pid"));
	if (cJSON_IsObject(wb)) {
		double pf = num(wb, "pendingFiles"), pd = num(wb, "pendingDirs");
		human(num(wb, "pendingBytes"), b, sizeof(b));
		if (pd > 0)
			printf("pending: %.0f file%s and %.0f new director%s, "
			       "%s not on the sandbox yet\n", pf,
			       pf == 1 ? "" : "s", pd, pd == 1 ? "y" : "ies", b);
		else
			printf("pending: %.0f file%s, %s not on the sandbox "
			       "yet\n", pf, pf == 1 ? "" : "s", b);
		human(num(wb, "sentBytes"), b, sizeof(b));
		printf("sent:    %.0f file%s in %.0f batch%s (%s)\n",
		       num(wb, "sentFiles"), num(wb, "sentFiles") == 1 ? "" : "s",
		       num(wb, "sentBatches"),
		       num(wb, "sentBatches") == 1 ? "" : "es", b);
		if (num(wb, "failedFiles") > 0)
			printf("failed:  %.0f file%s (last: %s)\n",
			       num(wb, "failedFiles"),
			       num(wb, "failedFiles") == 1 ? "" : "s",
			       str(wb, "lastError"));
		else
			printf("failed:  none\n");
	} else {
		printf("pending: unknown (this mount does not report it)\n");
	}
	int nk = cJSON_IsArray(kept) ? cJSON_GetArraySize(kept) : 0;
	if (nk)
		printf("kept:    %d file%s that could not be uploaded, data in:\n",
		       nk, nk == 1 ? "" : "s");
	for (int i = 0; i < nk; i++) {
		const cJSON *k = cJSON_GetArrayItem(kept, i);
		printf("  %s\n    -> %s\n    (%s)\n", str(k, "path"), str(k, "file"),
		       str(k, "reason"));
	}
}

int mbfs_status_main(int argc, char **argv)
{
	const char *mnt = NULL;
	bool wait = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--status") == 0)
			continue;
		if (strcmp(argv[i], "--wait") == 0)
			wait = true;
		else if (argv[i][0] == '-')
			return usage_error("unknown option with --status");
		else if (mnt)
			return usage_error("too many arguments");
		else
			mnt = argv[i];
	}
	if (!mnt)
		return usage_error("missing MOUNTPOINT");
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", strcmp(mnt, "/") ? mnt : "",
		     MB_CONTROL_NAME) >= (int)sizeof(path))
		return usage_error("MOUNTPOINT too long");
	int ret = 0;
	if (wait) {
		/* the mount sends everything queued before this write
		 * returns, and fails it when a file could not be sent */
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		ssize_t w = -1;
		if (fd >= 0) {
			do
				w = write(fd, "sync\n", 5);
			while (w < 0 && errno == EINTR);
			if (w < 0 && errno == EIO)
				ret = 1;
			else if (w < 0)
				fprintf(stderr, "mbfs: cannot wait for '%s': %s\n",
					mnt, strerror(errno));
			close(fd);
		}
		if (fd < 0 || (w < 0 && errno != EIO)) {
			if (fd < 0)
				fprintf(stderr, "mbfs: '%s' is not an mbfs mount "
					"(or not yours): %s\n", mnt, strerror(errno));
			return 2;
		}
	}
	char *text = read_control(path);
	if (!text) {
		fprintf(stderr, "mbfs: '%s' is not an mbfs mount (or not yours): "
			"%s\n", mnt, strerror(errno));
		return 2;
	}
	cJSON *doc = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		fprintf(stderr, "mbfs: cannot read the status of '%s'\n", mnt);
		return 2;
	}
	print_status(doc);
	if (ret)
		printf("some files could not be uploaded: see 'failed' and 'kept' "
		       "above, and the mount's log\n");
	cJSON_Delete(doc);
	return ret;
}
