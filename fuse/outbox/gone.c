/* gone.c: the names whose removal is still queued (see gone.h): a hash
 * table of paths, so a lookup walks up a path's directories at one probe
 * each. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/outbox/gone.h"

#define GONE_BUCKETS 1024u

struct gone_entry {
	struct gone_entry *next;
	char *path;
	unsigned count;
};

struct mbfs_gone {
	pthread_mutex_t lock;
	struct gone_entry *bucket[GONE_BUCKETS];   /* protected by lock */
	atomic_size_t entries;      /* read without the lock: none queued */
};

static unsigned hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;   /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h % GONE_BUCKETS;
}

static struct gone_entry **find(struct mbfs_gone *g, const char *path,
				size_t len)
{
	struct gone_entry **pp = &g->bucket[hash(path, len)];
	for (; *pp; pp = &(*pp)->next)
		if (strncmp((*pp)->path, path, len) == 0 && !(*pp)->path[len])
			break;
	return pp;
}

struct mbfs_gone *mbfs_gone_new(void)
{
	struct mbfs_gone *g = calloc(1, sizeof(*g));
	if (g)
		pthread_mutex_init(&g->lock, NULL);
	return g;
}

void mbfs_gone_free(struct mbfs_gone *g)
{
	if (!g)
		return;
	for (unsigned i = 0; i < GONE_BUCKETS; i++) {
		while (g->bucket[i]) {
			struct gone_entry *e = g->bucket[i];
			g->bucket[i] = e->next;
			free(e->path);
			free(e);
		}
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}

int mbfs_gone_add(struct mbfs_gone *g, const char *path)
{
	int rc = 0;
	pthread_mutex_lock(&g->lock);
	struct gone_entry **pp = find(g, path, strlen(path));
	if (*pp) {
		(*pp)->count++;
	} else if ((*pp = calloc(1, sizeof(**pp))) &&
		   ((*pp)->path = strdup(path))) {
		(*pp)->count = 1;
		g->entries++;
	} else {
		free(*pp);
		*pp = NULL;
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void mbfs_gone_remove(struct mbfs_gone *g, const char *path)
{
	pthread_mutex_lock(&g->lock);
	struct gone_entry **pp = find(g, path, strlen(path));
	struct gone_entry *e = *pp;
	if (e && !--e->count) {
		*pp = e->next;
		free(e->path);
		free(e);
		g->entries--;
	}
	pthread_mutex_unlock(&g->lock);
}

bool mbfs_gone_below(struct mbfs_gone *g, const char *path)
{
	if (!g || !atomic_load(&g->entries))
		return false;
	bool gone = false;
	pthread_mutex_lock(&g->lock);
	/* path, then each directory above it ("/a/b", "/a"; never "/") */
	for (size_t len = strlen(path); len > 1 && !gone;) {
		gone = *find(g, path, len) != NULL;
		while (len > 0 && path[--len] != '/')
			;
	}
	pthread_mutex_unlock(&g->lock);
	return gone;
}

bool mbfs_gone_at(struct mbfs_gone *g, const char *path, size_t len)
{
	if (!g || !atomic_load(&g->entries))
		return false;
	pthread_mutex_lock(&g->lock);
	bool gone = *find(g, path, len) != NULL;
	pthread_mutex_unlock(&g->lock);
	return gone;
}
