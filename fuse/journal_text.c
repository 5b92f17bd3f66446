/* journal_text.c: the journal's small texts, written whole (journal_int.h):
 * a reader sees the old text or the new one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "fuse/journal_int.h"

int mbfs_journal_write_file(const char *path, const char *text)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s" TMP_SUFFIX, path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text), off = 0;
	int rc = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

void mbfs_journal_owner_json(const struct mbfs_journal *j, cJSON *o)
{
	cJSON_AddStringToObject(o, "apiUrl", j->api_url);
	cJSON_AddStringToObject(o, "id", j->who.id);
	cJSON_AddStringToObject(o, "createdAt", j->who.created_at);
}
