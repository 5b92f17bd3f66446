/* unsent.c: the record of what an ended mount could not send (see
 * unsent.h): written at the daemon's end, taken by the next mount. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/durable/journal.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/unsent.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_pending.h"

static pthread_mutex_t unsent_lock = PTHREAD_MUTEX_INITIALIZER;

static int record_path(const struct mbfs *fs, char *out, size_t n)
{
	if (!fs->cache_dir[0] ||
	    snprintf(out, n, "%s/%s", fs->cache_dir, MBFS_UNSENT_NAME) >= (int)n)
		return -ENAMETOOLONG;
	return 0;
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0;
	FILE *m = open_memstream(&buf, &cap);
	char chunk[4096];
	size_t r;
	while (m && (r = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, r, m);
	fclose(f);
	if (m)
		fclose(m);
	return buf;
}

void mbfs_unsent_take(struct mbfs *fs)
{
	char path[PATH_MAX];
	if (record_path(fs, path, sizeof(path)))
		return;
	char *text = read_all(path);
	cJSON *rec = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!cJSON_IsObject(rec) || mbfs_unsent_count(rec) == 0) {
		cJSON_Delete(rec);
		return;
	}
	/* one log line a line: on the terminal now, as recovery's are */
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	if (m) {
		mbfs_unsent_print(m, rec, "", true);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(rec, "pendingFiles");
		if (cJSON_IsNumber(p) && p->valuedouble > 0)
			fprintf(m, "  what stayed in the journal goes to the sandbox "
				"now, or under kept/ (said next)\n");
		fclose(m);
	}
	for (char *l = out, *nl; l && *l; l = nl ? nl + 1 : l + strlen(l)) {
		nl = strchr(l, '\n');
		mb_log(MB_LOG_WARN, "%.*s", nl ? (int)(nl - l) : (int)strlen(l), l);
	}
	free(out);
	pthread_mutex_lock(&unsent_lock);
	cJSON_Delete(fs->unsent);
	fs->unsent = rec;
	fs->unsent_warned = false;
	pthread_mutex_unlock(&unsent_lock);
}

char *mbfs_unsent_json(struct mbfs *fs)
{
	char *t = NULL;
	pthread_mutex_lock(&unsent_lock);
	if (fs->unsent) {
		cJSON *o = cJSON_Duplicate(fs->unsent, true);
		if (o && cJSON_AddBoolToObject(o, "warned", fs->unsent_warned))
			t = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
	}
	pthread_mutex_unlock(&unsent_lock);
	return t;
}

void mbfs_unsent_seen(struct mbfs *fs)
{
	pthread_mutex_lock(&unsent_lock);
	fs->unsent_warned = true;
	pthread_mutex_unlock(&unsent_lock);
}

void mbfs_unsent_release(struct mbfs *fs)
{
	pthread_mutex_lock(&unsent_lock);
	cJSON_Delete(fs->unsent);
	fs->unsent = NULL;
	pthread_mutex_unlock(&unsent_lock);
}

/* Add the members of the JSON object text (from wbq, a whole object) to o. */
static void add_members(cJSON *o, const char *text, const char *const *names)
{
	cJSON *src = text ? cJSON_Parse(text) : NULL;
	for (; *names; names++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(src, *names);
		if (v)
			cJSON_AddItemToObject(o, *names, cJSON_Duplicate(v, true));
	}
	cJSON_Delete(src);
}

void mbfs_unsent_save(struct mbfs *fs)
{
	static const char *const wb_names[] = { "pendingFiles", "pendingDirs",
		"pendingBytes", "failedFiles", "lastError", NULL };
	char path[PATH_MAX], when[32];
	if (record_path(fs, path, sizeof(path)))
		return;
	char *wb = mbfs_wbq_json(fs);
	char *pend = mbfs_wbq_pending_json(fs, MBFS_UNSENT_PATHS);
	char *kept = fs->journal ? mbfs_journal_kept_json(fs->journal) : NULL;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		goto out;
	cJSON_AddStringToObject(o, "id", fs->ident.id);
	cJSON_AddStringToObject(o, "createdAt", fs->ident.created_at);
	cJSON_AddStringToObject(o, "apiUrl", fs->api_url);
	cJSON_AddStringToObject(o, "root", fs->root[0] ? fs->root : "/");
	cJSON_AddStringToObject(o, "mountpoint", fs->mountpoint);
	mb_format_iso8601(time(NULL), 0, when);
	cJSON_AddStringToObject(o, "endedAt", when);
	add_members(o, wb, wb_names);
	cJSON *pa = pend ? cJSON_Parse(pend) : NULL;
	cJSON_AddItemToObject(o, "pendingPaths", pa ? pa : cJSON_CreateArray());
	cJSON *ka = kept ? cJSON_Parse(kept) : NULL;
	cJSON_AddItemToObject(o, "kept", ka ? ka : cJSON_CreateArray());
	if (fs->journal)
		cJSON_AddStringToObject(o, "keptDir",
					mbfs_journal_kept_dir(fs->journal));
	if (mbfs_unsent_count(o) == 0) {
		/* everything is on the sandbox: what an earlier mount left was
		 * told by this one (its start, its control file) */
		if (unlink(path) && errno != ENOENT)
			mb_log(MB_LOG_WARN, "cannot remove '%s': %s", path,
			       strerror(errno));
		goto out;
	}
	char *text = cJSON_Print(o);
	int rc = text ? mb_write_file_whole(path, text, 1) : -ENOMEM;
	free(text);
	if (rc)
		mb_log(MB_LOG_ERR, "cannot write '%s' (%s): the next mount will "
		       "not say what this one did not send", path, strerror(-rc));
	else
		mb_log(MB_LOG_WARN, "not everything is on the sandbox: %d file%s "
		       "pending or kept, written to %s for the next mount and "
		       "`mbfs --status`", mbfs_unsent_count(o),
		       mbfs_unsent_count(o) == 1 ? "" : "s", path);
out:
	cJSON_Delete(o);
	free(kept);
	free(pend);
	free(wb);
}
