/* guestfile.c: a clean copy and the guest's file it copies (guestfile.h).
 *
 * The guest may move on from a copy: a command ran, or a stat shows
 * another size or time. The copies held open then check at their next
 * read, and fetch again when the guest's file changed (recheck,
 * refetch), as fds on a local disk read what another program wrote. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "fuse/durable/data.h"
#include "fuse/mbfs.h"
#include "fuse/node/guestfile.h"
#include "fuse/node/node_int.h"
#include "fuse/node/nodeset.h"
#include "fuse/view/view.h"

/* n is a clean copy of a guest file that st (the guest's, now) shows
 * changed since n was fetched. nodes_lock held. */
bool mbfs_node_behind(const struct mbfs_node *n, const struct stat *st)
{
	return !n->dirty && !n->fresh && !n->unlinked && n->base_known &&
	       ((uint64_t)st->st_size != n->base_size ||
		st->st_mtim.tv_sec != n->base_mtime);
}

/* A clean copy the guest may have moved on from (recheck): when the
 * guest's file differs from its base, drop it, so that the caller's load
 * fetches the guest's content again; the fds open on n read that, as on a
 * local disk when another program rewrites the file. n->lock held. */
void mbfs_node_follow_guest(struct mbfs *fs, struct mbfs_node *n)
{
	char path[MB_PATH_MAX];
	pthread_mutex_lock(&fs->nodes_lock);
	bool check = n->recheck && n->loaded && !n->dirty && !n->fresh &&
		     !n->unlinked && n->base_known && !n->partial &&
		     !n->recorded;
	bool refetch = n->refetch;
	n->recheck = false;
	n->refetch = false;
	snprintf(path, sizeof(path), "%s", n->path);
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!check || n->kept_file || n->linked)
		return;
	struct stat st;
	if (mbfs_view_getattr(fs, path, &st) || !S_ISREG(st.st_mode))
		return;
	pthread_mutex_lock(&fs->nodes_lock);
	bool drop = (refetch && !n->dirty) || mbfs_node_behind(n, &st);
	if (drop)
		n->loaded = false;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!drop)
		return;
	mbfs_node_set_fd(n, -1);
	if (n->local)
		mbfs_data_recycle(fs->data, n->local);
	n->local = NULL;
	n->in_memory = false;
	mb_log(MB_LOG_DEBUG, "'%s' changed on the sandbox while open: its "
	       "readers follow", path);
}

/* n's copy may be behind the guest's file. A file still open keeps its
 * name: a write through its fds is the path's, and a new open checks the
 * guest first (mbfs_node_open's outdated). One being let go does not: its
 * copy must not be shared again. nodes_lock held. */
static void unshare_if_let_go(struct mbfs_node *n)
{
	if (n->refs <= 0 || n->closing)
		n->shared = false;
}

void mbfs_node_invalidate_all(struct mbfs *fs)
{
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = fs->nodes->head; n; n = n->next)
		if (!n->dirty && n->loaded) {
			n->recheck = true;   /* its open fds follow the guest */
			n->refetch = true;
			unshare_if_let_go(n);
		}
	pthread_mutex_unlock(&fs->nodes_lock);
}

size_t mbfs_node_open_clean(struct mbfs *fs, struct mbfs_node_base *v,
			    size_t max)
{
	size_t k = 0;
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = fs->nodes->head; n && k < max; n = n->next) {
		if (n->refs <= 0 || n->dirty || n->fresh || n->unlinked ||
		    (n->loaded && (!n->base_known || n->partial)) ||
		    strlen(n->path) >= sizeof(v[k].path))
			continue;
		snprintf(v[k].path, sizeof(v[k].path), "%s", n->path);
		v[k].loaded = n->loaded;
		v[k].size = n->base_size;
		v[k].mtime = n->base_mtime;
		memcpy(v[k].id, n->guest_id, sizeof(v[k].id));
		v[k].held = n->handles > 0;
		k++;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	return k;
}

void mbfs_node_recheck(struct mbfs *fs, const char *path)
{
	pthread_mutex_lock(&fs->nodes_lock);
	for (struct mbfs_node *n = mbfs_nodeset_find(fs->nodes, path, NULL);
	     n; n = mbfs_nodeset_find(fs->nodes, path, n))
		if (!n->dirty && !n->unlinked) {
			n->recheck = true;
			unshare_if_let_go(n);
		}
	pthread_mutex_unlock(&fs->nodes_lock);
}
