/* journal_stage.c: the journal's staging notes (journal.h): guest paths an
 * upload stages, noted in the run directory before they exist so that a
 * later mount can remove them, and kept in memory as leftovers when their
 * removal failed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/durable/journal.h"
#include "fuse/durable/journal_int.h"

static int stage_file(const struct mbfs_journal *j, unsigned id, char *out,
		      size_t n)
{
	int r = snprintf(out, n, "%s/%u" STG_SUFFIX, j->run, id);
	return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static void free_stage(struct stage *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		free(s->paths[i]);
	if (s)
		free(s->paths);
	free(s);
}

int mbfs_journal_stage(struct mbfs_journal *j, const char *const *paths,
		       size_t count, unsigned *id)
{
	struct stage *s = calloc(1, sizeof(*s));
	cJSON *o = cJSON_CreateObject(), *a = o ? cJSON_AddArrayToObject(o, "paths") : NULL;
	char file[PATH_MAX], *text = NULL;
	int rc = -ENOMEM;
	if (!s || !a || !(s->paths = calloc(count ? count : 1, sizeof(char *))))
		goto out;
	for (s->n = 0; s->n < count; s->n++) {
		if (!(s->paths[s->n] = strdup(paths[s->n])))
			goto out;
		cJSON_AddItemToArray(a, cJSON_CreateString(paths[s->n]));
	}
	mbfs_journal_owner_json(j, o);
	pthread_mutex_lock(&j->lock);
	s->id = ++j->next_id;
	pthread_mutex_unlock(&j->lock);
	if (!(text = cJSON_PrintUnformatted(o)))
		goto out;
	rc = stage_file(j, s->id, file, sizeof(file));
	if (!rc)
		rc = mbfs_journal_write_file(file, text);
	if (rc)
		goto out;
	pthread_mutex_lock(&j->lock);
	s->next = j->stages;
	j->stages = s;
	pthread_mutex_unlock(&j->lock);
	*id = s->id;
	s = NULL;
out:
	free(text);
	cJSON_Delete(o);
	free_stage(s);
	return rc;
}

/* Take the note id out of the list (NULL when unknown). */
static struct stage *take_stage(struct mbfs_journal *j, unsigned id)
{
	struct stage *s = NULL;
	pthread_mutex_lock(&j->lock);
	for (struct stage **pp = &j->stages; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			s = *pp;
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&j->lock);
	return s;
}

void mbfs_journal_unstage(struct mbfs_journal *j, unsigned id)
{
	char file[PATH_MAX];
	struct stage *s = take_stage(j, id);
	if (stage_file(j, id, file, sizeof(file)) == 0)
		unlink(file);
	free_stage(s);
}

void mbfs_journal_leftover(struct mbfs_journal *j, unsigned id)
{
	pthread_mutex_lock(&j->lock);
	for (struct stage *s = j->stages; s; s = s->next)
		if (s->id == id)
			s->leftover = true;
	pthread_mutex_unlock(&j->lock);
}

int mbfs_journal_leftovers(struct mbfs_journal *j, char ***paths,
			   size_t *count, unsigned **ids, size_t *nids)
{
	size_t np = 0, ni = 0;
	*paths = NULL;
	*ids = NULL;
	*count = *nids = 0;
	pthread_mutex_lock(&j->lock);
	for (struct stage *s = j->stages; s; s = s->next) {
		if (s->leftover) {
			np += s->n;
			ni++;
		}
	}
	char **p = np ? calloc(np, sizeof(*p)) : NULL;
	unsigned *v = ni ? calloc(ni, sizeof(*v)) : NULL;
	if ((np && !p) || (ni && !v)) {
		pthread_mutex_unlock(&j->lock);
		free(p);
		free(v);
		return -ENOMEM;
	}
	np = ni = 0;
	for (struct stage *s = j->stages; s; s = s->next) {
		if (!s->leftover)
			continue;
		s->leftover = false;   /* handed out: one sweep at a time */
		v[ni++] = s->id;
		for (size_t i = 0; i < s->n; i++)
			if ((p[np] = strdup(s->paths[i])))
				np++;
	}
	pthread_mutex_unlock(&j->lock);
	*paths = p;
	*count = np;
	*ids = v;
	*nids = ni;
	return 0;
}

void mbfs_journal_free_stages(struct mbfs_journal *j)
{
	while (j->stages) {
		struct stage *s = j->stages;
		j->stages = s->next;
		free_stage(s);
	}
}
