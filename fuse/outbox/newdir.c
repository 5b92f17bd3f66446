/* newdir.c: the directories whose mkdir is still queued (see newdir.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "fuse/outbox/pathsel.h"
#include "fuse/outbox/newdir.h"

struct nd_entry {
	struct nd_entry *next;
	char *path;
	struct stat st;
	uint64_t id;                /* a moved file's (add_file), else 0 */
};

struct mbfs_newdirs {
	pthread_mutex_t lock;
	struct nd_entry *head;      /* protected by lock, oldest first */
	atomic_size_t count;        /* read without the lock: none pending */
	uint64_t next_id;           /* protected by lock */
};

struct mbfs_newdirs *mbfs_newdirs_new(void)
{
	struct mbfs_newdirs *nd = calloc(1, sizeof(*nd));
	if (nd)
		pthread_mutex_init(&nd->lock, NULL);
	return nd;
}

void mbfs_newdirs_free(struct mbfs_newdirs *nd)
{
	if (!nd)
		return;
	while (nd->head) {
		struct nd_entry *e = nd->head;
		nd->head = e->next;
		free(e->path);
		free(e);
	}
	pthread_mutex_destroy(&nd->lock);
	free(nd);
}

int mbfs_newdir_add(struct mbfs_newdirs *nd, const char *path,
		    const struct stat *st)
{
	struct nd_entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path))) {
		free(e);
		return -ENOMEM;
	}
	e->st = *st;
	pthread_mutex_lock(&nd->lock);
	struct nd_entry **pp = &nd->head;
	while (*pp)
		pp = &(*pp)->next;
	*pp = e;
	atomic_fetch_add(&nd->count, 1);
	pthread_mutex_unlock(&nd->lock);
	return 0;
}

uint64_t mbfs_newdir_add_file(struct mbfs_newdirs *nd, const char *path,
			      const struct stat *st)
{
	struct nd_entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path))) {
		free(e);
		return 0;
	}
	e->st = *st;
	pthread_mutex_lock(&nd->lock);
	e->id = ++nd->next_id;
	struct nd_entry **pp = &nd->head;
	while (*pp) {
		struct nd_entry *o = *pp;
		if (strcmp(o->path, path) != 0) {
			pp = &o->next;
			continue;
		}
		/* an older move onto the name: this one is what it shows */
		*pp = o->next;
		atomic_fetch_sub(&nd->count, 1);
		free(o->path);
		free(o);
	}
	*pp = e;
	atomic_fetch_add(&nd->count, 1);
	uint64_t id = e->id;
	pthread_mutex_unlock(&nd->lock);
	return id;
}

bool mbfs_newdir_remove_id(struct mbfs_newdirs *nd, uint64_t id,
			   struct stat *st)
{
	bool found = false;
	if (!id)
		return false;
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry **pp = &nd->head; *pp; pp = &(*pp)->next) {
		struct nd_entry *e = *pp;
		if (e->id == id) {
			*pp = e->next;
			atomic_fetch_sub(&nd->count, 1);
			if (st)
				*st = e->st;
			free(e->path);
			free(e);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return found;
}

void mbfs_newdir_remove(struct mbfs_newdirs *nd, const char *path)
{
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry **pp = &nd->head; *pp; pp = &(*pp)->next) {
		struct nd_entry *e = *pp;
		if (strcmp(e->path, path) == 0) {
			*pp = e->next;
			atomic_fetch_sub(&nd->count, 1);
			free(e->path);
			free(e);
			break;
		}
	}
	pthread_mutex_unlock(&nd->lock);
}

bool mbfs_newdir_set_perm(struct mbfs_newdirs *nd, const char *path,
			  unsigned perm)
{
	bool found = false;
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry *e = nd->head; e && !found; e = e->next) {
		if (strcmp(e->path, path) == 0) {
			e->st.st_mode = (e->st.st_mode & S_IFMT) |
					(perm & 07777);
			found = true;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return found;
}

int mbfs_newdir_stat(struct mbfs_newdirs *nd, const char *path,
		     struct stat *st)
{
	if (!nd || atomic_load(&nd->count) == 0)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry *e = nd->head; e && rc != 1; e = e->next) {
		if (strcmp(e->path, path) == 0) {
			*st = e->st;
			rc = 1;
		} else if (S_ISDIR(e->st.st_mode) &&
			   mbfs_path_selects(path, e->path,
					      MBFS_BATCH_BELOW)) {
			rc = -ENOENT;   /* unless a deeper one is path */
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return rc;
}

bool mbfs_newdir_above(struct mbfs_newdirs *nd, const char *path, char *out)
{
	if (!nd || atomic_load(&nd->count) == 0)
		return false;
	size_t best = 0;
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry *e = nd->head; e; e = e->next) {
		size_t n = strlen(e->path);
		if ((!best || n < best) &&
		    mbfs_path_selects(path, e->path,
				       MBFS_BATCH_SELF | MBFS_BATCH_BELOW)) {
			snprintf(out, MB_PATH_MAX, "%s", e->path);
			best = n;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return best != 0;
}

int mbfs_newdir_each(struct mbfs_newdirs *nd, const char *dir,
		     int (*fn)(void *ud, const char *name,
			       const struct stat *st),
		     void *ud)
{
	if (!nd || atomic_load(&nd->count) == 0)
		return 0;
	struct nd_entry *copy = NULL, **tail = &copy;
	int rc = 0;
	pthread_mutex_lock(&nd->lock);
	for (struct nd_entry *e = nd->head; e && !rc; e = e->next) {
		if (!mbfs_path_selects(e->path, dir, MBFS_BATCH_CHILDREN))
			continue;
		struct nd_entry *c = calloc(1, sizeof(*c));
		const char *slash = strrchr(e->path, '/');
		if (!c || !(c->path = strdup(slash ? slash + 1 : e->path))) {
			free(c);
			rc = -ENOMEM;
			break;
		}
		c->st = e->st;
		*tail = c;
		tail = &c->next;
	}
	pthread_mutex_unlock(&nd->lock);
	while (copy) {
		struct nd_entry *c = copy;
		copy = c->next;
		if (!rc)
			rc = fn(ud, c->path, &c->st);
		free(c->path);
		free(c);
	}
	return rc;
}
