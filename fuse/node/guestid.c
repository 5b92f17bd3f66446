/* guestid.c: which of the guest's files an open clean copy is
 * (guestfile.h).
 *
 * The API names files by path only. A command that renames a file some
 * program holds open here would leave that program's fds on the old name:
 * reads of a file that is gone, writes that make a new one. The guest's
 * device, inode number and birth time, learned before and after each
 * command (fuse/face/follow.c), say where the file went. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/mbfs.h"
#include "fuse/node/guestfile.h"
#include "fuse/node/node.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"

/* A copy whose identity means something: clean, of a file the guest has,
 * and under its name. */
static bool clean_copy(const struct mbfs_node *n)
{
	return !n->dirty && !n->fresh && !n->unlinked;
}

void mbfs_node_set_id(struct mbfs *fs, const char *path, const char *id)
{
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n; n = mbfs_nodeset_find(fs->nodes, path, n))
		if (clean_copy(n))
			snprintf(n->guest_id, sizeof(n->guest_id), "%s", id);
	pthread_mutex_unlock(&fs->nodes_lock);
}

static bool among(struct mbfs_node *const *v, size_t n, const struct mbfs_node *x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* n's copy is no longer of a name: its fds keep what they read. */
static void unname(struct mbfs_node *n, bool *records)
{
	n->unlinked = true;
	n->shared = false;
	n->rec_stale = n->recorded;
	*records |= n->recorded;
}

size_t mbfs_node_followed(struct mbfs *fs, const struct mbfs_node_move *m,
			  size_t k)
{
	size_t moved = 0, cap = 0;
	struct mbfs_node **mv = NULL;
	size_t *which = NULL;
	bool records = false;
	pthread_mutex_lock(&fs->nodes_lock);
	/* every copy that moves, first: in a swap, each name's new file is
	 * the other's old one, which must not be taken for replaced */
	for (size_t i = 0; i < k; i++)
		for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, m[i].from, NULL);
		     n; n = mbfs_nodeset_find(fs->nodes, m[i].from, n)) {
			if (!clean_copy(n) || strcmp(n->guest_id, m[i].id) != 0)
				continue;
			if (moved == cap) {
				size_t nc = cap ? 2 * cap : 8;
				struct mbfs_node **a = realloc(mv, nc * sizeof(*a));
				size_t *b = a ? realloc(which, nc * sizeof(*b)) : NULL;
				if (a)
					mv = a;
				if (!b)
					break;   /* without memory: those stay */
				which = b;
				cap = nc;
			}
			mv[moved] = n;
			which[moved++] = i;
		}
	/* what a move replaced keeps its fds' bytes, nameless */
	for (size_t i = 0; i < k; i++)
		for (struct mbfs_node *n = m[i].to ? mbfs_nodeset_find(fs->nodes, m[i].to, NULL)
						   : NULL;
		     n; n = mbfs_nodeset_find(fs->nodes, m[i].to, n))
			if (clean_copy(n) && !among(mv, moved, n))
				unname(n, &records);
	for (size_t j = 0; j < moved; j++) {
		const struct mbfs_node_move *x = &m[which[j]];
		char *np = x->to ? strdup(x->to) : NULL;
		if (np)
			mbfs_nodeset_move(fs->nodes, mv[j], np);
		else
			unname(mv[j], &records);   /* gone from the guest */
		mv[j]->rec_stale = mv[j]->recorded;
		records |= mv[j]->recorded;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	free(mv);
	free(which);
	if (records)
		mbfs_node_records_sync(fs);
	return moved;
}
