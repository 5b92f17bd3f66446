/* unsent.c: mbexec's one warning that the last mount of this sandbox's
 * cache did not put everything on it (the control file's "unsent", see
 * fuse/unsent.h): after it, the line "unsent-seen" tells the mount, so
 * the next command says nothing. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/ident.h"
#include "shim/mbexec.h"
#include "shim/result.h"

#define FUSE_SUPER_MAGIC 0x65735546
#define SHOWN_MAX 5   /* paths named; --status names them all */

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *name)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
	return s ? s : "";
}

/* The control file, whole (malloc'd), or NULL; only a FUSE one. */
static char *read_control(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct statfs sfs;
	if (fd < 0)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (fstatfs(fd, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC) {
		for (;;) {
			if (len + 4096 > cap) {
				char *nb = realloc(buf, cap = 2 * cap + 8192);
				if (!nb)
					break;
				buf = nb;
			}
			ssize_t r = read(fd, buf + len, cap - len - 1);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += (size_t)r;
		}
	}
	close(fd);
	if (buf)
		buf[len] = '\0';
	return buf;
}

/* The record u, and what this mount kept (now_kept: its recovery of
 * what stayed in the journal, or later failures). */
static void warn(const char *mount_dir, const cJSON *u, const cJSON *now_kept)
{
	const cJSON *kept = cJSON_GetObjectItemCaseSensitive(u, "kept");
	const cJSON *lists[2] = { kept, now_kept };
	int nk = cJSON_IsArray(kept) ? cJSON_GetArraySize(kept) : 0;
	int nn = cJSON_IsArray(now_kept) ? cJSON_GetArraySize(now_kept) : 0;
	double np = num(u, "pendingFiles") + num(u, "pendingDirs");
	mbx_note("the last mount of %s@%s (on '%s', ended %s) did not put "
		 "everything on the sandbox: %d file%s kept locally, %.0f left "
		 "in its journal (this mount sent %s at its start, or kept "
		 "them); 'mbfs --status %s' lists them", str(u, "id"),
		 str(u, "createdAt"), str(u, "mountpoint"), str(u, "endedAt"),
		 nk + nn, nk + nn == 1 ? "" : "s", np, np == 1 ? "it" : "those",
		 mount_dir);
	for (int l = 0, shown = 0; l < 2; l++) {
		int n = cJSON_IsArray(lists[l]) ? cJSON_GetArraySize(lists[l]) : 0;
		for (int i = 0; i < n && shown < SHOWN_MAX; i++, shown++) {
			const cJSON *k = cJSON_GetArrayItem(lists[l], i);
			mbx_note("  kept: %s -> %s", str(k, "path"), str(k, "file"));
		}
	}
}

void mbx_warn_unsent(const struct mbx_target *t)
{
	char path[MB_PATH_MAX + sizeof(MB_CONTROL_NAME) + 2];
	if (!t->mount_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/%s",
		 strcmp(t->mount_dir, "/") ? t->mount_dir : "", MB_CONTROL_NAME);
	char *text = read_control(path);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	free(text);
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(doc, "unsent");
	if (cJSON_IsObject(u) &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(u, "warned"))) {
		warn(t->mount_dir, u, cJSON_GetObjectItemCaseSensitive(doc, "kept"));
		int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			/* best effort: at worst the next command says it again */
			if (write(fd, MB_CONTROL_UNSENT_SEEN,
				  strlen(MB_CONTROL_UNSENT_SEEN)) < 0) {
			}
			close(fd);
		}
	}
	cJSON_Delete(doc);
}
