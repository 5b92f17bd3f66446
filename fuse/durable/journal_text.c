/* journal_text.c: the journal's small texts, written whole (journal_int.h):
 * a reader sees the old text or the new one. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "common/util.h"
#include "fuse/durable/journal_int.h"

int mbfs_journal_write_file(const char *path, const char *text)
{
	/* TMP_SUFFIX is the temporary name's: a replay skips those. Synced
	 * before its rename: a record in a file of its own (no user
	 * attributes here) is as durable as one in an attribute */
	return mb_write_file_whole(path, text, 1);
}

void mbfs_journal_owner_json(const struct mbfs_journal *j, cJSON *o)
{
	cJSON_AddStringToObject(o, "apiUrl", j->api_url);
	cJSON_AddStringToObject(o, "id", j->who.id);
	cJSON_AddStringToObject(o, "createdAt", j->who.created_at);
}
