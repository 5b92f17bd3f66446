/* guestid.c: which of the guest's files an open clean copy is (node.h).
 *
 * The API names files by path only. A command that renames a file some
 * program holds open here would leave that program's fds on the old name:
 * reads of a file that is gone, writes that make a new one. The guest's
 * device and inode number, learned before and after each command
 * (fuse/face/follow.c), say where the file went. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"

/* A copy whose identity means something: clean, of a file the guest has,
 * under its name, and in no journal record (which would name the path). */
static bool clean_copy(const struct mbfs_node *n)
{
	return !n->dirty && !n->fresh && !n->unlinked && !n->recorded;
}

void mbfs_node_forget_ids(struct mbfs *fs, const char *path)
{
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n; n = mbfs_nodeset_find(fs->nodes, path, n))
		n->guest_id[0] = '\0';
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

size_t mbfs_node_followed(struct mbfs *fs, const char *from, const char *to,
			  const char *id)
{
	size_t moved = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	/* the file the move replaced first, so the moved copies are not
	 * taken for it */
	for (struct mbfs_node *n = to ? mbfs_nodeset_find(fs->nodes, to, NULL)
				      : NULL;
	     n; n = mbfs_nodeset_find(fs->nodes, to, n))
		if (clean_copy(n) && strcmp(n->guest_id, id) != 0) {
			n->unlinked = true;   /* its fds keep what they read */
			n->shared = false;
		}
	struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, from, NULL);
	while (n) {
		struct mbfs_node *next = mbfs_nodeset_find(fs->nodes, from, n);
		if (clean_copy(n) && strcmp(n->guest_id, id) == 0) {
			char *np = to ? strdup(to) : NULL;
			if (!to) {
				n->unlinked = true;   /* gone from the guest */
				n->shared = false;
			} else if (np) {
				mbfs_nodeset_move(fs->nodes, n, np);
			}
			moved++;
		}
		n = next;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	return moved;
}
