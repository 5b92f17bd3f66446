/* prefetch.c: bulk reads of small files (prefetch.h): when a directory's
 * files are worth one archive, and fetching and unpacking it into the data
 * cache. Reads the archive with tarread.c; does not open or load files
 * (load.c asks here on a miss and then takes the copy). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/cache/cache.h"
#include "fuse/mbfs.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/bulk/prefetch_int.h"
#include "fuse/transport/xfer.h"
#include "fuse/transport/xfer_int.h"


struct mbfs_prefetch *mbfs_prefetch_new(mbfs_prefetch_ours_fn ours)
{
	struct mbfs_prefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->ours = ours;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->done, NULL);
	return p;
}

void mbfs_prefetch_free(struct mbfs_prefetch *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < MAX_RECS; i++)
		free(p->recs[i].dir);
	for (size_t i = 0; i < MAX_WALKS; i++)
		free(p->walks[i].dir);
	for (size_t i = 0; i < MAX_COLD; i++) {
		free(p->cold[i].dir);
		free(p->lcold[i].dir);
		free(p->rcold[i].dir);
	}
	free(p->leftover);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* ---- when: the records of recent cold reads and archives ---- */

/* dir is path or one of its ancestors. */
static bool covers(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Forget the records of tab (n of them) done, and the cold ones, older
 * than the window (all: whatever their age; never one in flight). Lock
 * held. */
static void drop_done(struct rec *tab, size_t n, uint64_t now, bool all)
{
	for (size_t i = 0; i < n; i++) {
		struct rec *r = &tab[i];
		if (r->dir && r->done &&
		    (all || now - r->at_ms > MBFS_PREFETCH_WINDOW_MS)) {
			free(r->dir);
			memset(r, 0, sizeof(*r));
		}
	}
}

static void drop_cold(struct cold *tab, uint64_t now, bool all)
{
	for (size_t i = 0; i < MAX_COLD; i++) {
		struct cold *c = &tab[i];
		if (c->dir && (all || now - c->at_ms > MBFS_PREFETCH_WINDOW_MS)) {
			free(c->dir);
			memset(c, 0, sizeof(*c));
		}
	}
}

static void expire(struct mbfs_prefetch *p, uint64_t now)
{
	drop_done(p->recs, MAX_RECS, now, false);
	drop_done(p->walks, MAX_WALKS, now, false);
	drop_cold(p->cold, now, false);
	drop_cold(p->lcold, now, false);
	drop_cold(p->rcold, now, false);
}

/* The record id of tab is still in flight. Lock held. */
static bool in_flight(const struct rec *tab, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (tab[i].dir && tab[i].id == id)
			return !tab[i].done;
	return false;
}

/* Record id of tab ended (complete: nothing was cut); wake the waiters.
 * Lock held. */
static void finish(struct mbfs_prefetch *p, struct rec *tab, size_t n,
		   uint64_t id, bool complete)
{
	for (size_t i = 0; i < n; i++) {
		if (tab[i].dir && tab[i].id == id) {
			tab[i].done = true;
			tab[i].complete = complete;
			tab[i].at_ms = mb_now_ms();
		}
	}
	pthread_cond_broadcast(&p->done);
}

/* A record whose directory's parent is parent, other than self. */
static bool sibling_archived(struct mbfs_prefetch *p, const char *parent,
			     const char *self)
{
	char up[MB_PATH_MAX + 2];
	for (size_t i = 0; i < MAX_RECS; i++) {
		const char *d = p->recs[i].dir;
		if (!d || strcmp(d, "/") == 0 || strcmp(d, self) == 0 ||
		    strlen(d) >= MB_PATH_MAX)
			continue;
		mbfs_parent_path(d, up);
		if (strcmp(up, parent) == 0)
			return true;
	}
	return false;
}

static struct rec *rec_of(struct mbfs_prefetch *p, const char *dir)
{
	for (size_t i = 0; i < MAX_RECS; i++)
		if (p->recs[i].dir && strcmp(p->recs[i].dir, dir) == 0)
			return &p->recs[i];
	return NULL;
}

/* Note a first cold read (or listing: tab) in dir; true when dir had one
 * already. */
static bool cold_again(struct cold *tab, const char *dir, uint64_t now)
{
	struct cold *free_slot = NULL, *oldest = &tab[0];
	for (size_t i = 0; i < MAX_COLD; i++) {
		struct cold *c = &tab[i];
		if (c->dir && strcmp(c->dir, dir) == 0)
			return true;
		if (!c->dir && !free_slot)
			free_slot = c;
		if (c->at_ms < oldest->at_ms)
			oldest = c;
	}
	struct cold *c = free_slot ? free_slot : oldest;
	char *d = strdup(dir);
	if (d) {
		free(c->dir);
		c->dir = d;
		c->at_ms = now;
	}
	return false;
}

/* The directory to archive for a cold read in dir, into base; false when
 * none (read the file alone). Lock held. */
static bool choose(struct mbfs_prefetch *p, const char *dir, uint64_t now,
		   char *base)
{
	char par[MB_PATH_MAX + 2], gpar[MB_PATH_MAX + 2];
	mbfs_parent_path(dir, par);
	mbfs_parent_path(par, gpar);
	bool top = strcmp(dir, "/") == 0;
	if (!cold_again(p->cold, dir, now))
		return false;
	if (!top && strcmp(par, "/") && sibling_archived(p, gpar, par))
		strcpy(base, gpar);
	else if (!top && sibling_archived(p, par, dir))
		strcpy(base, par);
	else
		strcpy(base, dir);
	/* archived already and cut by the caps (or failed): not again */
	if (rec_of(p, base)) {
		if (strcmp(base, dir) == 0 || rec_of(p, dir))
			return false;
		strcpy(base, dir);
	}
	return true;
}

/* A free record of tab (the oldest done one when full), or NULL. Lock
 * held. */
static struct rec *new_rec(struct rec *tab, size_t n)
{
	struct rec *slot = NULL;
	for (size_t i = 0; i < n; i++) {
		struct rec *r = &tab[i];
		if (!r->dir)
			return r;
		if (r->done && (!slot || r->at_ms < slot->at_ms))
			slot = r;
	}
	if (slot) {
		free(slot->dir);
		memset(slot, 0, sizeof(*slot));
	}
	return slot;
}

/* After mbfs_prefetch_run: its pieces' directory to the next pack.sh,
 * and j's memory. */
static void release_job(struct job *j)
{
	if (j->pieces.sizes)
		mbfs_prefetch_leave(j->p, j->fs, strdup(j->pieces.dir),
				    j->pieces.note);
	else
		mbfs_xfer_dir_gone(j->fs, j->pieces.note);   /* none made */
	free(j->pieces.sizes);
	for (size_t i = 0; i < j->nexcl; i++)
		free(j->excl[i]);
	free(j->excl);
	free(j->first);
}

/* ---- the entry point ---- */

static char *relative(const char *base, const char *dir)
{
	if (strcmp(base, dir) == 0)
		return strdup(".");
	return strdup(dir + (strcmp(base, "/") == 0 ? 1 : strlen(base) + 1));
}

/* j's excluded subtrees: those under base archived whole, or being
 * archived. Lock held. */
static void exclusions(struct mbfs_prefetch *p, struct job *j)
{
	j->excl = calloc(MAX_RECS, sizeof(*j->excl));
	for (size_t i = 0; j->excl && i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (!r->dir || (r->done && !r->complete) ||
		    strcmp(r->dir, j->base) == 0 || !covers(j->base, r->dir))
			continue;
		char *s = relative(j->base, r->dir);
		if (s)
			j->excl[j->nexcl++] = s;
	}
}

void mbfs_prefetch_stop(struct mbfs *fs)
{
	struct mbfs_prefetch *p = fs->prefetch;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	char *dir = p->leftover;
	unsigned note = p->leftover_note;
	p->leftover = NULL;
	pthread_mutex_unlock(&p->lock);
	if (dir)
		mbfs_xfer_remove_noted(fs, dir, note);
	free(dir);
}

int mbfs_prefetch_miss(struct mbfs *fs, const char *path, uint64_t size)
{
	struct mbfs_prefetch *p = fs->prefetch;
	char dir[MB_PATH_MAX + 2], base[MB_PATH_MAX + 2];
	if (!p || size > MBFS_PREFETCH_FILE_MAX || strlen(path) >= MB_PATH_MAX ||
	    mbfs_check_alive(fs))
		return 0;
	mbfs_parent_path(path, dir);
	pthread_mutex_lock(&p->lock);
	uint64_t now = mb_now_ms();
	expire(p, now);
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (r->dir && !r->done && covers(r->dir, dir)) {
			uint64_t id = r->id;
			while (in_flight(p->recs, MAX_RECS, id))
				pthread_cond_wait(&p->done, &p->lock);
			pthread_mutex_unlock(&p->lock);
			return 1;
		}
	}
	for (size_t i = 0; i < MAX_RECS; i++) {
		struct rec *r = &p->recs[i];
		if (r->dir && r->complete && covers(r->dir, dir)) {
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
	}
	struct rec *r = NULL;
	struct job j = { .fs = fs, .p = p, .base = base, .fd = -1 };
	if (choose(p, dir, now, base) && (r = new_rec(p->recs, MAX_RECS)) &&
	    (r->dir = strdup(base)) && (j.first = relative(base, dir))) {
		r->id = ++p->next_id;
		exclusions(p, &j);
	} else if (r) {
		free(r->dir);
		r->dir = NULL;
		r = NULL;
	}
	uint64_t id = r ? r->id : 0;
	pthread_mutex_unlock(&p->lock);
	if (!id)
		return 0;

	bool complete = mbfs_prefetch_run(&j);

	pthread_mutex_lock(&p->lock);
	finish(p, p->recs, MAX_RECS, id, complete);
	pthread_mutex_unlock(&p->lock);
	release_job(&j);
	return 1;
}

/* ---- listing walks ---- */

/* A walk covering dir, in flight or done within the window. Lock held. */
static struct rec *walk_of(struct mbfs_prefetch *p, const char *dir)
{
	for (size_t i = 0; i < MAX_WALKS; i++)
		if (p->walks[i].dir && covers(p->walks[i].dir, dir))
			return &p->walks[i];
	return NULL;
}

/* Was dir listed cold within the window? Lock held. */
static bool in_cold(const struct cold *tab, const char *dir)
{
	for (size_t i = 0; i < MAX_COLD; i++)
		if (tab[i].dir && strcmp(tab[i].dir, dir) == 0)
			return true;
	return false;
}

static bool listed_cold(const struct mbfs_prefetch *p, const char *dir)
{
	return in_cold(p->lcold, dir);
}

void mbfs_prefetch_listing(struct mbfs *fs, const char *dir, bool readdir)
{
	struct mbfs_prefetch *p = fs->prefetch;
	char par[MB_PATH_MAX + 2];
	if (!p || strlen(dir) >= MB_PATH_MAX ||
	    mbfs_cache_listed(fs->cache, dir) || mbfs_check_alive(fs))
		return;
	mbfs_parent_path(dir, par);
	pthread_mutex_lock(&p->lock);
	uint64_t now = mb_now_ms();
	expire(p, now);
	struct rec *w = walk_of(p, dir);
	if (w) {
		/* in flight: its listings answer; done: this one was cut
		 * or is new, and is listed alone */
		uint64_t id = w->id;
		while (in_flight(p->walks, MAX_WALKS, id))
			pthread_cond_wait(&p->done, &p->lock);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	/* a cold listing next to a sibling listed cold within the window is
	 * a walk: the rest of the parent's subtree comes in one go. Going
	 * down one path (ls a; ls a/b; cat a/b/c) never is. */
	bool walk = false, top = strcmp(dir, "/") == 0;
	for (size_t i = 0; i < MAX_COLD && !walk && !top; i++) {
		const char *c = p->lcold[i].dir;
		char up[MB_PATH_MAX + 2];
		if (!c || strcmp(c, dir) == 0 || strcmp(c, "/") == 0)
			continue;
		mbfs_parent_path(c, up);
		walk = strcmp(up, par) == 0;
	}
	cold_again(p->lcold, dir, now);
	if (readdir)
		cold_again(p->rcold, dir, now);
	/* the parent and its own parent listed cold just before: a walk
	 * down a tree (rm -rf, cp -r, du) takes the grandparent's subtree,
	 * not one parent's after another */
	char gpar[MB_PATH_MAX + 2];
	mbfs_parent_path(par, gpar);
	/* three readdirs down one path, each cold (rm -rf, find or du of a
	 * tree the mount has not listed): the top one's subtree at once,
	 * not when the walk comes to a sibling. Lookups down a path (an
	 * editor opening a deep file) never are; nor is the mount's root
	 * walked so. */
	bool down = !walk && readdir && !top && strcmp(par, "/") &&
		    strcmp(gpar, "/") && in_cold(p->rcold, par) &&
		    in_cold(p->rcold, gpar);
	if (walk && strcmp(par, "/") && listed_cold(p, par) &&
	    listed_cold(p, gpar))
		strcpy(par, gpar);
	else if (down)
		strcpy(par, gpar);
	walk = walk || down;
	struct job j = { .fs = fs, .p = p, .base = par, .fd = -1,
			 .listings = true };
	uint64_t id = 0;
	if (walk && (w = new_rec(p->walks, MAX_WALKS)) && (w->dir = strdup(par)) &&
	    (j.first = strdup("."))) {
		w->id = id = ++p->next_id;
	} else if (w) {
		free(w->dir);
		w->dir = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (!id)
		return;

	bool complete = mbfs_prefetch_run(&j);

	pthread_mutex_lock(&p->lock);
	finish(p, p->walks, MAX_WALKS, id, complete);
	pthread_mutex_unlock(&p->lock);
	release_job(&j);
}

void mbfs_prefetch_relisted(struct mbfs *fs, const char *dir)
{
	struct mbfs_prefetch *p = fs->prefetch;
	if (!p || strlen(dir) >= MB_PATH_MAX)
		return;
	pthread_mutex_lock(&p->lock);
	cold_again(p->lcold, dir, mb_now_ms());
	pthread_mutex_unlock(&p->lock);
}

void mbfs_prefetch_listing_now(struct mbfs *fs, const char *dir)
{
	struct mbfs_prefetch *p = fs->prefetch;
	if (!p || strlen(dir) >= MB_PATH_MAX || mbfs_check_alive(fs))
		return;
	struct job j = { .fs = fs, .p = p, .base = dir, .fd = -1,
			 .listings = true, .first = strdup(".") };
	if (j.first)
		mbfs_prefetch_run(&j);
	release_job(&j);
}

void mbfs_prefetch_forget(struct mbfs *fs)
{
	struct mbfs_prefetch *p = fs->prefetch;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	/* walks in flight stay: listings wait for them */
	drop_done(p->walks, MAX_WALKS, 0, true);
	drop_cold(p->lcold, 0, true);
	drop_cold(p->rcold, 0, true);
	pthread_mutex_unlock(&p->lock);
}
