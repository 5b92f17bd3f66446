/* nodeset.h: the open nodes of a mount: a list to walk and a hash by path.
 *
 * Thousands of nodes live at once while small files wait in the
 * write-back queue (a git add holds one per object), and every open,
 * create, link and unlink looks its path up: a list alone made each of
 * them a walk of all the others. The list is for the walks that need
 * every node (renames of directories, sync, exit); lookups by path go
 * through the hash.
 *
 * The set does not own its nodes (node.c frees them). Not thread-safe:
 * every call with fs->nodes_lock held.
 */
#ifndef MBFS_NODESET_H
#define MBFS_NODESET_H

#include <stdbool.h>
#include <stddef.h>

struct mbfs;
struct mbfs_node;

struct mbfs_nodeset {
	struct mbfs_node *head;   /* newest first, through node->next */
	struct mbfs_node **tab;   /* buckets, through node->hnext */
	size_t nb, count;
};

/* 0, or -ENOMEM. */
int mbfs_nodeset_init(struct mbfs_nodeset *s);
/* The table only; the nodes are freed by their owner first. */
void mbfs_nodeset_fini(struct mbfs_nodeset *s);

/* n (not in the set) goes in at the head. */
void mbfs_nodeset_add(struct mbfs_nodeset *s, struct mbfs_node *n);
/* n (in the set) goes out. */
void mbfs_nodeset_del(struct mbfs_nodeset *s, struct mbfs_node *n);
/* n (in the set) gets path (malloc'd; taken over, the old one freed). */
void mbfs_nodeset_move(struct mbfs_nodeset *s, struct mbfs_node *n,
		       char *path);

/* The next node of exactly path after prev (NULL: the first), or NULL.
 * Any order; a node moved or deleted meanwhile ends the walk. */
struct mbfs_node *mbfs_nodeset_find(const struct mbfs_nodeset *s,
				    const char *path,
				    const struct mbfs_node *prev);

/* A node (open, or queued for write-back) holds a local copy of path
 * (loaded, dirty or created here): that copy, not a clean one from the
 * guest, is what opens see. The one call here that takes fs->nodes_lock
 * itself (callers may hold a node's lock, no other). */
bool mbfs_nodeset_busy(struct mbfs *fs, const char *path);

#endif
