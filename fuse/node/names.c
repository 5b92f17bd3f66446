/* names.c: an open node and the names around it (node.h): a rename or
 * an unlink made here moves or frees its name, a file removed while open
 * is hidden (hidden.h) with its copy fetched first, and the handles the
 * kernel holds say whether a path is still open. Locking as in node.c. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"

void mbfs_node_renamed(struct mbfs *fs, const char *from, const char *to)
{
	size_t fl = strlen(from);
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = fs->nodes->head; n; n = n->next) {
		if (strcmp(n->path, to) == 0 && !n->unlinked) {
			n->unlinked = true;   /* replaced by the rename */
			n->shared = false;
			n->rec_stale = n->recorded;
			continue;
		}
		/* one replaced or removed keeps the name its batch, maybe in
		 * flight, lands under (a barrier on that name finds it) */
		if (n->unlinked || strncmp(n->path, from, fl) != 0 ||
		    (n->path[fl] != '\0' && n->path[fl] != '/'))
			continue;
		char *np;
		if (asprintf(&np, "%s%s", to, n->path + fl) < 0)
			continue;
		mbfs_nodeset_move(fs->nodes, n, np);
		n->rec_stale = n->recorded;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_records_sync(fs);
}

void mbfs_node_unlinked(struct mbfs *fs, const char *path)
{
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n; n = mbfs_nodeset_find(fs->nodes, path, n)) {
		n->unlinked = true;
		n->shared = false;
		n->rec_stale = n->recorded;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	mbfs_node_records_sync(fs);
}

/* ll.c counts a handle open until just after our release returns, and
 * an unlink in between hides the file: the last paths whose last handle
 * went count as open a moment longer (a program's own rename to a hidden
 * name so soon after a close is still taken for a hide). Protected by
 * fs->nodes_lock. */
#define LET_GO_N 8
#define LET_GO_MS 50
static struct {
	char path[MB_PATH_MAX];
	uint64_t at;
} let_go[LET_GO_N];
static unsigned let_go_next;

void mbfs_node_handle(struct mbfs *fs, struct mbfs_node *n, int delta)
{
	pthread_mutex_lock(&fs->nodes_lock);
	n->handles += delta;
	if (n->handles <= 0 && delta < 0) {
		unsigned k = let_go_next++ % LET_GO_N;
		snprintf(let_go[k].path, sizeof(let_go[k].path), "%s", n->path);
		let_go[k].at = mb_now_ms();
	}
	pthread_mutex_unlock(&fs->nodes_lock);
}

bool mbfs_node_open_at(struct mbfs *fs, const char *path)
{
	uint64_t now = mb_now_ms();
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = NULL;
	while ((n = mbfs_nodeset_find(fs->nodes, path, n)) && n->handles <= 0)
		;
	bool open = n != NULL;
	for (unsigned k = 0; !open && k < LET_GO_N; k++)
		open = let_go[k].at && now - let_go[k].at < LET_GO_MS &&
		       strcmp(let_go[k].path, path) == 0;
	pthread_mutex_unlock(&fs->nodes_lock);
	return open;
}

bool mbfs_node_at(struct mbfs *fs, const char *path)
{
	pthread_mutex_lock(&fs->nodes_lock);
	bool any = mbfs_nodeset_find(fs->nodes, path, NULL) != NULL;
	pthread_mutex_unlock(&fs->nodes_lock);
	return any;
}

void mbfs_node_hide(struct mbfs *fs, const char *path, const char *hidden,
		    struct mbfs_node **out, bool *fresh)
{
	/* the guest's file is about to go: an open copy that is not here yet
	 * (or that a command may have changed: recheck) is fetched first (a
	 * large one as pieces in the guest's /tmp, which stay); without it,
	 * its handles read the file as gone, or as it was */
	for (;;) {
		pthread_mutex_lock(&fs->nodes_lock);
		struct mbfs_node *n = NULL;
		while ((n = mbfs_nodeset_find(fs->nodes, path, n)) &&
		       ((n->loaded && !n->recheck) || n->unlinked))
			;
		if (n)
			n->refs++;
		pthread_mutex_unlock(&fs->nodes_lock);
		if (!n)
			break;
		pthread_mutex_lock(&n->lock);
		mbfs_node_follow_guest(fs, n);   /* clears recheck */
		int rc = mbfs_load(fs, n, false);
		pthread_mutex_unlock(&n->lock);
		mbfs_node_release(fs, n);
		if (rc) {
			mb_log(MB_LOG_WARN, "'%s' went while open and its content "
			       "could not be fetched (%s): it reads as gone",
			       path, strerror(-rc));
			break;
		}
	}
	pthread_mutex_lock(&fs->nodes_lock);
	struct mbfs_node *n = mbfs_node_find_shared(fs, path);
	if (n && n->unlinked)
		n = NULL;
	if (n)
		n->refs++;
	pthread_mutex_unlock(&fs->nodes_lock);
	/* an upload in progress ends first: whether the file reached the
	 * guest is then known, and none starts once it is unlinked */
	if (n)
		pthread_mutex_lock(&n->lock);
	pthread_mutex_lock(&fs->nodes_lock);
	/* one that replaced the guest's file leaves that file to remove */
	*fresh = n && n->fresh && !n->replaces;
	/* hidden, they keep the name for the barriers of what they left on
	 * their way (mbfs_node_renamed), but no open or stat of the name
	 * finds them again: a later file there is another node */
	for (struct mbfs_node *o = mbfs_nodeset_find(fs->nodes, path, NULL);
	     o; o = mbfs_nodeset_find(fs->nodes, path, o)) {
		o->unlinked = true;
		o->shared = false;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (n)
		pthread_mutex_unlock(&n->lock);
	/* no node lock held: these may take them */
	mbfs_node_renamed(fs, path, hidden);
	mbfs_node_unlinked(fs, hidden);
	*out = n;
}
