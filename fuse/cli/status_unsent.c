/* status_unsent.c: `mbfs --status` of something that is not a mount: a
 * cache directory, the mountpoint of an ended mount, or a container id;
 * what the mount that ended there did not send (its unsent record,
 * unsent.h). Looks at local files only. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/cli/status_int.h"
#include "fuse/outbox/unsent.h"

/* The record in cache directory dir, parsed, or NULL. */
static cJSON *record_in(const char *dir)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, MBFS_UNSENT_NAME) >=
	    (int)sizeof(path))
		return NULL;
	char *text = mbfs_status_read(path);
	cJSON *rec = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!cJSON_IsObject(rec)) {
		cJSON_Delete(rec);
		return NULL;
	}
	return rec;
}

/* Where default cache directories are made (main.c's default_cache_dir). */
static bool default_base(char *out, size_t n)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (x && x[0] == '/')
		return snprintf(out, n, "%s/mbfs", x) < (int)n;
	if (home && home[0] == '/')
		return snprintf(out, n, "%s/.cache/mbfs", home) < (int)n;
	return false;
}

/* A record under the default base whose mount was at mnt (an absolute
 * path), or whose cache directory is the container id's. */
static cJSON *record_for(const char *mnt, const char *id)
{
	char base[PATH_MAX], dir[PATH_MAX];
	if (!default_base(base, sizeof(base)))
		return NULL;
	DIR *d = opendir(base);
	if (!d)
		return NULL;
	cJSON *found = NULL;
	size_t idl = id ? strlen(id) : 0;
	for (struct dirent *e; !found && (e = readdir(d));) {
		if (e->d_name[0] == '.' ||
		    snprintf(dir, sizeof(dir), "%s/%s", base, e->d_name) >=
		    (int)sizeof(dir))
			continue;
		/* ID-HASH: the container's, whatever its API URL */
		if (id && (strncmp(e->d_name, id, idl) || e->d_name[idl] != '-'))
			continue;
		cJSON *rec = record_in(dir);
		if (rec && (id || strcmp(mbfs_status_str(rec, "mountpoint"), mnt) == 0))
			found = rec;
		else
			cJSON_Delete(rec);
	}
	closedir(d);
	return found;
}

int mbfs_status_unsent(const char *arg, bool json)
{
	char real[PATH_MAX];
	cJSON *rec = record_in(arg);
	if (!rec && realpath(arg, real))
		rec = record_for(real, NULL);
	if (!rec && !strchr(arg, '/'))
		rec = record_for(NULL, arg);
	if (!rec)
		return -1;
	if (json) {
		cJSON *o = cJSON_CreateObject();
		char *t = NULL;
		if (o && cJSON_AddItemToObject(o, "unsent", rec)) {
			rec = NULL;
			t = cJSON_PrintUnformatted(o);
		}
		if (t)
			printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
	} else {
		printf("not mounted: ");
		mbfs_unsent_print(stdout, rec, "", true);
		printf("a mount of that container sends what stayed in the "
		       "journal (or keeps it, if the sandbox changed or is "
		       "gone)\n");
	}
	cJSON_Delete(rec);
	return 1;
}
