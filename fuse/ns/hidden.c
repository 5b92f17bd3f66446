/* hidden.c: files unlinked or replaced while open (see hidden.h).
 *
 * Two lists under h->lock: the hidden files (their name, a reference to
 * their node, the attributes they had), and the guest paths still to
 * remove, each with the thread that hid it. A removal in flight is marked
 * busy; whoever needs it done waits on h->cond. One thread, started with
 * the first pending removal, makes those older than MBFS_HIDDEN_DELAY_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/ns/hidden.h"
#include "fuse/cache/inode.h"
#include "fuse/mbfs.h"
#include "fuse/view/view.h"
#include "fuse/transport/name.h"
#include "fuse/node/node.h"
#include "fuse/ns/ns.h"

#define HIDDEN_HEX 16

struct hfile {
	struct hfile *next;
	char *name;                 /* its hidden path */
	struct mbfs_node *node;     /* a reference, or NULL */
	struct stat st;             /* its attributes when it went */
};

struct removal {
	struct removal *next;
	char *path;
	pthread_t by;               /* the thread that hid it */
	uint64_t since_ms;
	bool busy;                  /* being removed */
};

struct mbfs_hidden {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* a removal ended, one was queued, stop */
	struct hfile *files;        /* protected by lock */
	struct removal *pending;    /* protected by lock, oldest first */
	atomic_int nfiles, npending;   /* read without the lock */
	bool running, stop;         /* the thread; protected by lock */
	pthread_t thread;
};

struct mbfs_hidden *mbfs_hidden_new(void)
{
	struct mbfs_hidden *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&h->lock, NULL);
	atomic_init(&h->nfiles, 0);
	atomic_init(&h->npending, 0);
	return h;
}

void mbfs_hidden_free(struct mbfs_hidden *h)
{
	if (!h)
		return;
	while (h->pending) {
		struct removal *r = h->pending;
		h->pending = r->next;
		free(r->path);
		free(r);
	}
	while (h->files) {   /* nodes are freed with the others */
		struct hfile *f = h->files;
		h->files = f->next;
		free(f->name);
		free(f);
	}
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

bool mbfs_hidden_is_name(const char *path)
{
	const char *name = strrchr(path, '/');
	name = name ? name + 1 : path;
	size_t pl = sizeof(MBFS_HIDDEN_PREFIX) - 1;
	if (strncmp(name, MBFS_HIDDEN_PREFIX, pl) != 0 ||
	    strlen(name) != pl + HIDDEN_HEX)
		return false;
	return strspn(name + pl, "0123456789abcdef") == HIDDEN_HEX;
}

static struct hfile *find_file(struct mbfs_hidden *h, const char *name)
{
	for (struct hfile *f = h->files; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static void unlink_removal(struct mbfs_hidden *h, struct removal *r)
{
	for (struct removal **pp = &h->pending; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	atomic_fetch_sub(&h->npending, 1);
	free(r->path);
	free(r);
}

/* Make the removals at least min_age_ms old (0: all), waiting for those
 * in flight elsewhere. h->lock held; dropped around each request. */
static void settle_locked(struct mbfs *fs, struct mbfs_hidden *h,
			  uint64_t min_age_ms)
{
	for (;;) {
		uint64_t now = mb_now_ms();
		struct removal *r = h->pending;
		bool waiting = false;
		for (; r; r = r->next) {
			if (now - r->since_ms < min_age_ms)
				continue;
			if (!r->busy)
				break;
			waiting = true;
		}
		if (!r && !waiting)
			return;
		if (!r) {
			pthread_cond_wait(&h->cond, &h->lock);
			continue;
		}
		r->busy = true;
		char path[MB_PATH_MAX];
		snprintf(path, sizeof(path), "%s", r->path);
		pthread_mutex_unlock(&h->lock);
		int rc = mbfs_ns_unlink(fs, path);
		if (rc && rc != -ENOENT)
			mb_log(MB_LOG_WARN, "cannot remove '%s' from the sandbox "
			       "(it was removed here while open): %s", path,
			       strerror(-rc));
		pthread_mutex_lock(&h->lock);
		unlink_removal(h, r);
		pthread_cond_broadcast(&h->cond);
	}
}

static void *remover(void *arg)
{
	struct mbfs *fs = arg;
	struct mbfs_hidden *h = fs->hidden;
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		if (!h->pending) {
			pthread_cond_wait(&h->cond, &h->lock);
			continue;
		}
		uint64_t due = h->pending->since_ms + MBFS_HIDDEN_DELAY_MS;
		uint64_t now = mb_now_ms();
		if (now < due) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + (due - now) * 1000000ull;
			ts.tv_sec += (time_t)(ns / 1000000000ull);
			ts.tv_nsec = (long)(ns % 1000000000ull);
			pthread_cond_timedwait(&h->cond, &h->lock, &ts);
			continue;
		}
		settle_locked(fs, h, MBFS_HIDDEN_DELAY_MS);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

int mbfs_hidden_hide(struct mbfs *fs, const char *from, const char *hidden)
{
	struct mbfs_hidden *h = fs->hidden;
	struct hfile *f = calloc(1, sizeof(*f));
	struct removal *r = calloc(1, sizeof(*r));
	if (!f || !r || !(f->name = strdup(hidden)) || !(r->path = strdup(from))) {
		if (f)
			free(f->name);
		free(f);
		free(r);
		return -ENOMEM;
	}
	/* its attributes while the name still leads to it */
	if (!mbfs_node_stat_new(fs, NULL, from, &f->st) &&
	    mbfs_view_lookup(fs, from, &f->st)) {
		f->st.st_mode = S_IFREG | 0600;
		f->st.st_nlink = 1;
		f->st.st_uid = fs->uid;
		f->st.st_gid = fs->gid;
	}
	bool fresh;
	mbfs_node_hide(fs, from, hidden, &f->node, &fresh);
	mbfs_cache_removed(fs->cache, from, false);
	mbfs_ino_renamed(fs, from, hidden);

	pthread_mutex_lock(&h->lock);
	f->next = h->files;
	h->files = f;
	atomic_fetch_add(&h->nfiles, 1);
	if (fresh) {   /* created here, never uploaded: nothing to remove */
		free(r->path);
		free(r);
	} else {
		r->by = pthread_self();
		r->since_ms = mb_now_ms();
		struct removal **pp = &h->pending;
		while (*pp)
			pp = &(*pp)->next;
		*pp = r;
		atomic_fetch_add(&h->npending, 1);
		if (!h->running && !h->stop &&
		    pthread_create(&h->thread, NULL, remover, fs) == 0)
			h->running = true;
		pthread_cond_broadcast(&h->cond);
	}
	bool alone = !h->running;
	pthread_mutex_unlock(&h->lock);
	if (!fresh && alone)   /* no thread: the next change or sync does it */
		mb_log(MB_LOG_DEBUG, "no thread to remove '%s' later", from);
	return 0;
}

void mbfs_hidden_renamed(struct mbfs *fs, const char *from, const char *to)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || atomic_load(&h->nfiles) == 0)
		return;
	size_t fl = strlen(from);
	pthread_mutex_lock(&h->lock);
	for (struct hfile *f = h->files; f; f = f->next) {
		if (strncmp(f->name, from, fl) != 0 || f->name[fl] != '/')
			continue;
		char *name = NULL;
		if (asprintf(&name, "%s%s", to, f->name + fl) < 0)
			continue;   /* without memory: its fds see ENOENT */
		free(f->name);
		f->name = name;
	}
	pthread_mutex_unlock(&h->lock);
}

bool mbfs_hidden_getattr_node(struct mbfs *fs, struct mbfs_node *n,
			      struct stat *st)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || atomic_load(&h->nfiles) == 0)
		return false;
	char name[MB_PATH_MAX];
	bool found = false;
	pthread_mutex_lock(&h->lock);
	for (struct hfile *f = h->files; f && !found; f = f->next)
		if (f->node == n) {
			*st = f->st;
			snprintf(name, sizeof(name), "%s", f->name);
			found = true;
		}
	pthread_mutex_unlock(&h->lock);
	if (found) {   /* its size and time as written since */
		mbfs_node_fgetattr(fs, n, st);
		st->st_ino = (ino_t)mbfs_ino(fs, name);
	}
	return found;
}

int mbfs_hidden_getattr(struct mbfs *fs, const char *path, struct stat *st)
{
	struct mbfs_hidden *h = fs->hidden;
	bool name = mbfs_hidden_is_name(path);
	if (!h || (!name && atomic_load(&h->npending) == 0))
		return 0;
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	struct hfile *f = name ? find_file(h, path) : NULL;
	if (f) {
		*st = f->st;
		if (f->node)   /* its size and time as written since */
			mbfs_node_fgetattr(fs, f->node, st);
		rc = 1;
	} else if (name) {
		rc = -ENOENT;   /* ll.c looks for a free hidden name */
	} else {
		for (struct removal *r = h->pending; r && !rc; r = r->next)
			if (strcmp(r->path, path) == 0)
				rc = -ENOENT;
	}
	pthread_mutex_unlock(&h->lock);
	if (rc == 1)
		st->st_ino = (ino_t)mbfs_ino(fs, path);
	return rc;
}

int mbfs_hidden_open(struct mbfs *fs, const char *path, int flags,
		     struct mbfs_node **out)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || !mbfs_hidden_is_name(path))
		return 0;
	pthread_mutex_lock(&h->lock);
	struct hfile *f = find_file(h, path);
	struct mbfs_node *n = f ? f->node : NULL;
	if (n)
		mbfs_node_ref(fs, n);
	pthread_mutex_unlock(&h->lock);
	if (!n)
		return -ENOENT;
	int rc = (flags & O_TRUNC) ? mbfs_node_truncate(fs, n, 0) : 0;
	if (rc) {
		mbfs_node_release(fs, n);
		return rc;
	}
	*out = n;
	return 1;
}

bool mbfs_hidden_pending(struct mbfs *fs, const char *path)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || atomic_load(&h->npending) == 0)
		return false;
	bool found = false;
	pthread_mutex_lock(&h->lock);
	for (struct removal *r = h->pending; r && !found; r = r->next)
		found = strcmp(r->path, path) == 0;
	pthread_mutex_unlock(&h->lock);
	return found;
}

int mbfs_hidden_unlink(struct mbfs *fs, const char *path)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || !mbfs_hidden_is_name(path))
		return 0;
	pthread_mutex_lock(&h->lock);
	struct hfile *f = find_file(h, path);
	if (f) {
		for (struct hfile **pp = &h->files; *pp; pp = &(*pp)->next) {
			if (*pp == f) {
				*pp = f->next;
				break;
			}
		}
		atomic_fetch_sub(&h->nfiles, 1);
	}
	pthread_mutex_unlock(&h->lock);
	if (f) {
		if (f->node)
			mbfs_node_release(fs, f->node);
		mbfs_ino_removed(fs, path);
		free(f->name);
		free(f);
	}
	return 1;
}

void mbfs_hidden_settle(struct mbfs *fs, const char *keep)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h || atomic_load(&h->npending) == 0)
		return;
	pthread_t self = pthread_self();
	pthread_mutex_lock(&h->lock);
	/* our own rename replaces keep: one atomic mv -fT, no removal (unless
	 * the thread has begun it: then it is waited for) */
	for (bool again = keep != NULL; again;) {
		again = false;
		for (struct removal *r = h->pending; r; r = r->next) {
			if (!pthread_equal(r->by, self) || strcmp(r->path, keep))
				continue;
			if (r->busy) {
				pthread_cond_wait(&h->cond, &h->lock);
				again = true;
			} else {
				unlink_removal(h, r);
			}
			break;
		}
	}
	settle_locked(fs, h, 0);
	pthread_mutex_unlock(&h->lock);
}

void mbfs_hidden_stop(struct mbfs *fs)
{
	struct mbfs_hidden *h = fs->hidden;
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_broadcast(&h->cond);
	bool running = h->running;
	pthread_mutex_unlock(&h->lock);
	if (running)
		pthread_join(h->thread, NULL);
	pthread_mutex_lock(&h->lock);
	h->running = false;
	settle_locked(fs, h, 0);
	struct hfile *files = h->files;
	h->files = NULL;
	atomic_store(&h->nfiles, 0);
	pthread_mutex_unlock(&h->lock);
	while (files) {
		struct hfile *f = files;
		files = f->next;
		if (f->node)
			mbfs_node_release(fs, f->node);
		free(f->name);
		free(f);
	}
}
