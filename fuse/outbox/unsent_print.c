/* unsent_print.c: an unsent record (unsent.h) for a person; shared by the
 * mount that finds one, `mbfs --status` and `mbfs -u`. No mount state. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "fuse/outbox/unsent.h"

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

int mbfs_unsent_count(const cJSON *rec)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(rec, "kept");
	double nk = cJSON_IsArray(k) ? cJSON_GetArraySize(k) : 0;
	double failed = num(rec, "failedFiles");
	/* failedFiles counts the kept ones, and mkdirs that failed */
	return (int)(num(rec, "pendingFiles") + num(rec, "pendingDirs") +
		     (failed > nk ? failed : nk));
}

void mbfs_unsent_print(FILE *out, const cJSON *rec, const char *prefix,
		       bool head)
{
	const char *mnt = str(rec, "mountpoint");
	double pf = num(rec, "pendingFiles") + num(rec, "pendingDirs");
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(rec, "pendingPaths");
	const cJSON *kept = cJSON_GetObjectItemCaseSensitive(rec, "kept");
	int nk = cJSON_IsArray(kept) ? cJSON_GetArraySize(kept) : 0;
	int np = cJSON_IsArray(paths) ? cJSON_GetArraySize(paths) : 0;
	if (head)
		fprintf(out, "%sthe mount of %s@%s on '%s' that ended %s did not put "
		"everything on the sandbox:\n", prefix, str(rec, "id"),
		str(rec, "createdAt"), mnt, str(rec, "endedAt"));
	if (pf > 0) {
		const char *why = str(rec, "lastError");
		double nd = num(rec, "pendingDirs"), nf = pf - nd;
		char what[96];
		if (nd > 0)
			snprintf(what, sizeof(what), "%.0f file%s and %.0f new "
				 "director%s", nf, nf == 1 ? "" : "s", nd,
				 nd == 1 ? "y" : "ies");
		else
			snprintf(what, sizeof(what), "%.0f file%s", nf,
				 nf == 1 ? "" : "s");
		fprintf(out, "%s  %s not sent, left in the journal of its cache "
			"directory (%s):\n", prefix, what,
			why[0] ? why : "the sandbox did not answer");
		for (int i = 0; i < np; i++) {
			const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
			fprintf(out, "%s    %s%s\n", prefix, mnt, p ? p : "?");
		}
		if (pf > np)
			fprintf(out, "%s    and %.0f more\n", prefix, pf - np);
	}
	if (nk)
		fprintf(out, "%s  %d file%s could not be uploaded; data kept in:\n",
			prefix, nk, nk == 1 ? "" : "s");
	char more[64];
	snprintf(more, sizeof(more), "%s  ", prefix);
	mbfs_unsent_print_kept(out, kept, more, str(rec, "keptDir"));
}

/* A few, then a count: thousands of kept files are a cause to look for,
 * not a list to scroll. */
#define KEPT_SHOWN 10

void mbfs_unsent_print_kept(FILE *out, const cJSON *kept, const char *prefix,
			    const char *kept_dir)
{
	int nk = cJSON_IsArray(kept) ? cJSON_GetArraySize(kept) : 0;
	for (int i = 0; i < nk && i < KEPT_SHOWN; i++) {
		const cJSON *k = cJSON_GetArrayItem(kept, i);
		fprintf(out, "%s  %s\n%s    -> %s\n%s    (%s)\n", prefix,
			str(k, "path"), prefix, str(k, "file"), prefix,
			str(k, "reason"));
	}
	if (nk > KEPT_SHOWN)
		fprintf(out, "%s  ... and %d more, all under %s\n", prefix,
			nk - KEPT_SHOWN, kept_dir && kept_dir[0] ? kept_dir :
			"the cache directory's kept/");
}
