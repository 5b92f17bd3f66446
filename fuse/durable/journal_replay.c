/* journal_replay.c: replaying the run directories of ended mounts
 * (journal.h): their outbox logs first, then their records and staging
 * notes, handed to the caller one at a time while the directory's lock is
 * held; the dirty copies answered LATER are decided together at the end
 * of their directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/log.h"
#include "fuse/durable/journal.h"
#include "fuse/durable/journal_int.h"

/* One staging list of an ended mount. */
static enum mbfs_jact replay_stage(struct mbfs_journal *j, const char *file,
				   const struct mbfs_jreplay *ops, bool *foreign)
{
	char *text = mbfs_journal_read_small(file);
	cJSON *o = text ? cJSON_Parse(text) : NULL;
	const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "paths") : NULL;
	struct mbfs_jrec owner;
	enum mbfs_jact act = MBFS_J_DONE;   /* unreadable: nothing to go on */
	memset(&owner, 0, sizeof(owner));
	if (cJSON_IsObject(o) && mbfs_journal_parse_owner(o, &owner) && cJSON_IsArray(a)) {
		size_t n = (size_t)cJSON_GetArraySize(a), k = 0;
		const char **v = calloc(n ? n : 1, sizeof(*v));
		const cJSON *it;
		cJSON_ArrayForEach(it, a)
			if (v && cJSON_IsString(it))
				v[k++] = it->valuestring;
		if (!mbfs_journal_same_container(j, &owner)) {
			*foreign = true;
			act = MBFS_J_LEAVE;
		} else if (v) {
			act = ops->staged(ops->ud, &owner, v, k);
		} else {
			act = MBFS_J_LEAVE;
		}
		free(v);
	}
	cJSON_Delete(o);
	free(text);
	return act;
}

/* One record of an ended mount: file is its data file carrying it as an
 * attribute (local NULL), or a record file with its data file local. */
static enum mbfs_jact replay_rec(struct mbfs_journal *j, const char *file,
				 const char *local,
				 const struct mbfs_jreplay *ops, bool *foreign)
{
	struct mbfs_jrec r;
	char *text;
	if (!local) {
		local = file;
		text = mbfs_journal_read_rec_xattr(file);
	} else if (access(local, F_OK)) {
		return MBFS_J_DONE;   /* no data left to save */
	} else {
		text = mbfs_journal_read_small(file);
	}
	int ok = mbfs_journal_parse_rec(text, &r) == 0;
	free(text);
	if (ok && !mbfs_journal_same_container(j, &r)) {
		*foreign = true;
		return MBFS_J_LEAVE;
	}
	enum mbfs_jact act = ops->dirty(ops->ud, local, ok ? &r : NULL);
	if (act == MBFS_J_DONE)
		unlink(local);
	return act;
}

/* The dirty copies answered LATER: their data file and record file
 * (NULL: an attribute of the data file). */
struct later {
	char **local, **rec;
	size_t n, cap;
};

static void later_add(struct later *l, const char *local, const char *rec)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **a = realloc(l->local, cap * sizeof(*a));
		if (a)
			l->local = a;
		char **b = a ? realloc(l->rec, cap * sizeof(*b)) : NULL;
		if (!b)
			return;   /* left as it is: the next mount finds it */
		l->rec = b;
		l->cap = cap;
	}
	l->local[l->n] = strdup(local);
	l->rec[l->n] = rec ? strdup(rec) : NULL;
	if (l->local[l->n])
		l->n++;
	else
		free(l->rec[l->n]);
}

static void later_flush(struct later *l, const struct mbfs_jreplay *ops)
{
	enum mbfs_jact *acts = l->n ? calloc(l->n, sizeof(*acts)) : NULL;
	if (acts && ops->flush) {
		for (size_t i = 0; i < l->n; i++)
			acts[i] = MBFS_J_LEAVE;
		ops->flush(ops->ud, acts, l->n);
		for (size_t i = 0; i < l->n; i++) {
			if (acts[i] != MBFS_J_DONE)
				continue;
			unlink(l->local[i]);
			if (l->rec[i])
				unlink(l->rec[i]);
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		free(l->local[i]);
		free(l->rec[i]);
	}
	free(acts);
	free(l->local);
	free(l->rec);
}

/* Replay one run directory whose lock we hold. */
static void replay_dir(struct mbfs_journal *j, const char *dir,
		       const struct mbfs_jreplay *ops)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	bool foreign = false;
	char p[PATH_MAX];
	struct later later = { 0 };
	if (!dp)
		return;
	/* removals and mkdirs first: the files' records may need them */
	if (ops->outbox)
		mbfs_journal_replay_outbox(j, dir, ops, &foreign);
	while ((de = readdir(dp))) {
		const char *name = de->d_name;
		bool rec = mbfs_journal_ends_with(name, REC_SUFFIX);
		bool stg = mbfs_journal_ends_with(name, STG_SUFFIX);
		if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p) ||
		    strcmp(name, LOCK_NAME) == 0 || mbfs_journal_ends_with(name, TMP_SUFFIX) ||
		    name[0] == '.')
			continue;
		enum mbfs_jact act;
		if (stg) {
			act = replay_stage(j, p, ops, &foreign);
		} else if (rec) {
			char local[PATH_MAX];
			snprintf(local, sizeof(local), "%.*s",
				 (int)(strlen(p) - strlen(REC_SUFFIX)), p);
			if (mbfs_journal_has_rec_xattr(local))
				continue;   /* the attribute is newer */
			act = replay_rec(j, p, local, ops, &foreign);
			if (act == MBFS_J_LATER)
				later_add(&later, local, p);
		} else if (mbfs_journal_has_rec_xattr(p)) {
			/* DONE removed the data with its attribute */
			if (replay_rec(j, p, NULL, ops, &foreign) == MBFS_J_LATER)
				later_add(&later, p, NULL);
			continue;
		} else {
			continue;
		}
		if (act == MBFS_J_DONE)
			unlink(p);
	}
	closedir(dp);
	later_flush(&later, ops);
	if (!foreign)
		mbfs_journal_close_dir(dir);
	else {
		size_t left;
		mbfs_journal_sweep_dir(dir, true, &left);   /* clean copies only */
	}
}

int mbfs_journal_replay(struct mbfs_journal *j,
			const struct mbfs_jreplay *ops)
{
	DIR *dp = opendir(j->dir);
	struct dirent *de;
	char p[PATH_MAX], lock[PATH_MAX];
	if (!dp)
		return -errno;
	while ((de = readdir(dp))) {
		if (strncmp(de->d_name, RUN_PREFIX, strlen(RUN_PREFIX)) != 0 ||
		    snprintf(p, sizeof(p), "%s/%s", j->dir, de->d_name) >= (int)sizeof(p) ||
		    strcmp(p, j->run) == 0 ||
		    snprintf(lock, sizeof(lock), "%s/" LOCK_NAME, p) >= (int)sizeof(lock))
			continue;
		int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;
		/* a free lock: the mount that held it has ended */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			mb_log(MB_LOG_DEBUG, "replaying '%s' (left by a mount that "
			       "ended)", p);
			replay_dir(j, p, ops);
		}
		close(fd);
	}
	closedir(dp);
	return 0;
}
