/* nodeset.c: the open nodes: a list to walk and a hash by path (see
 * nodeset.h). */
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/mbfs.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"

#define FIRST_BUCKETS 256u

static size_t bucket(const struct mbfs_nodeset *s, const char *path)
{
	return (size_t)(mbfs_fnv1a(MBFS_FNV_OFFSET, path) % s->nb);
}

int mbfs_nodeset_init(struct mbfs_nodeset *s)
{
	memset(s, 0, sizeof(*s));
	s->tab = calloc(FIRST_BUCKETS, sizeof(*s->tab));
	if (!s->tab)
		return -ENOMEM;
	s->nb = FIRST_BUCKETS;
	return 0;
}

void mbfs_nodeset_fini(struct mbfs_nodeset *s)
{
	free(s->tab);
	memset(s, 0, sizeof(*s));
}

static void hash_in(struct mbfs_nodeset *s, struct mbfs_node *n)
{
	size_t b = bucket(s, n->path);
	n->hnext = s->tab[b];
	s->tab[b] = n;
}

static void hash_out(struct mbfs_nodeset *s, struct mbfs_node *n)
{
	for (struct mbfs_node **pp = &s->tab[bucket(s, n->path)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
	n->hnext = NULL;
}

/* Twice the buckets once there are more nodes than buckets; without
 * memory the chains only grow longer. */
static void grow(struct mbfs_nodeset *s)
{
	if (s->count <= s->nb || s->nb > SIZE_MAX / 4 / sizeof(*s->tab))
		return;
	struct mbfs_node **old = s->tab;
	size_t onb = s->nb;
	struct mbfs_node **tab = calloc(2 * onb, sizeof(*tab));
	if (!tab)
		return;
	s->tab = tab;
	s->nb = 2 * onb;
	for (size_t i = 0; i < onb; i++) {
		for (struct mbfs_node *n = old[i], *next; n; n = next) {
			next = n->hnext;
			hash_in(s, n);
		}
	}
	free(old);
}

void mbfs_nodeset_add(struct mbfs_nodeset *s, struct mbfs_node *n)
{
	n->next = s->head;
	if (s->head)
		s->head->pprev = &n->next;
	n->pprev = &s->head;
	s->head = n;
	s->count++;
	hash_in(s, n);
	grow(s);
}

void mbfs_nodeset_del(struct mbfs_nodeset *s, struct mbfs_node *n)
{
	hash_out(s, n);
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
	n->next = NULL;
	n->pprev = NULL;
	s->count--;
}

void mbfs_nodeset_move(struct mbfs_nodeset *s, struct mbfs_node *n,
		       char *path)
{
	hash_out(s, n);
	free(n->path);
	n->path = path;
	hash_in(s, n);
}

struct mbfs_node *mbfs_nodeset_find(const struct mbfs_nodeset *s,
				    const char *path,
				    const struct mbfs_node *prev)
{
	struct mbfs_node *n = prev ? prev->hnext : s->tab[bucket(s, path)];
	while (n && strcmp(n->path, path) != 0)
		n = n->hnext;
	return n;
}

bool mbfs_nodeset_busy(struct mbfs *fs, const char *path)
{
	bool busy = false;
	pthread_mutex_lock(&fs->nodes_lock);
	/* a node still loading (the reader that asked for an archive, say)
	 * takes the guest's content anyway */
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n && !busy; n = mbfs_nodeset_find(fs->nodes, path, n))
		busy = n->loaded || n->dirty || n->fresh;
	pthread_mutex_unlock(&fs->nodes_lock);
	return busy;
}

/* An upload of path made a new file there (node_int.h). */
void mbfs_node_forget_ids(struct mbfs *fs, const char *path)
{
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n; n = mbfs_nodeset_find(fs->nodes, path, n))
		n->guest_id[0] = '\0';
}
