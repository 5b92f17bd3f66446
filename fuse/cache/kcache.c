/* kcache.c: the paths the kernel was shown, and one thread that asks it to
 * drop their attributes and pages (see kcache.h).
 *
 * A chained hash set of paths, each with a sighting generation, and a
 * queue of paths to invalidate (a path is queued once until the thread
 * takes it). "Everything" is a flag: the thread then walks a copy of the
 * set. A path the kernel holds no inode for (invalidate: -ENOENT) is
 * forgotten, unless it was seen again after it was queued or the kernel
 * may still hold it as missing. A path a lookup said was missing carries
 * until when the kernel may keep that (missing_until); "every name" is a
 * flag too, for one epoch notification however often it is asked for.
 * Expired missing records go with the next invalidation of everything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse/mbfs.h"

#include "common/log.h"
#include "common/util.h"
#include "fuse/cache/kcache.h"

#define JOIN_WAIT_MS 2000
/* fuse_kernel.h (not installed with libfuse 3.14): protocol 7.44's
 * notification that every name the kernel holds is to be looked up again,
 * and the header a notification starts with */
#define NOTIFY_INC_EPOCH 8
struct notify_header {
	uint32_t len;
	int32_t code;
	uint64_t unique;        /* 0: a notification */
};

struct kpath {
	struct kpath *next;     /* in its bucket */
	uint64_t hash;
	uint64_t gen;           /* bumped by every sighting */
	unsigned type;          /* S_IFMT bits shown, 0 when not known */
	uint64_t missing_until; /* ms: the kernel may hold it as missing */
	bool queued;
	char path[];
};

/* One queued invalidation. */
struct kitem {
	struct kitem *next;
	uint64_t gen;           /* of the path when queued */
	char path[];
};

struct mbfs_kcache {
	pthread_mutex_t lock;
	pthread_cond_t wake;    /* work queued, or stop */
	pthread_cond_t idle;    /* done moved, or the thread ended */
	/* protected by lock */
	struct kpath **tab;
	size_t nbuckets, count;
	uint64_t gen;
	/* gen when the kernel last dropped every name (an epoch): a path
	 * seen at or before it and gone since is held by no valid name, so
	 * a lookup of it is a fresh one, where ESTALE would fail a mkdir or
	 * a link (mbfs_kcache_gone) */
	uint64_t epoch_gen;
	struct kitem *head, **tail;
	struct kitem *names_q;  /* names to drop (mbfs_kcache_drop_name) */
	bool all;               /* every remembered path is stale */
	bool names;             /* every name, negative ones too */
	bool epochs;            /* the kernel takes NOTIFY_INC_EPOCH */
	uint64_t neg_ms;        /* how long the kernel keeps a missing name */
	uint64_t asked, done;   /* requests queued / invalidated (counts) */
	bool stop, running, joined, full_logged;
	/* written by start before the thread runs */
	const struct mbfs_kernel *kernel;
	pthread_t thread;
};

static uint64_t hash_path(const char *s)
{
	return mbfs_fnv1a(MBFS_FNV_OFFSET, s);
}

/* Is p path itself, or below it? */
static bool under(const char *p, const char *path, size_t n)
{
	if (strcmp(path, "/") == 0)
		return true;
	return strncmp(p, path, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

struct mbfs_kcache *mbfs_kcache_new(void)
{
	struct mbfs_kcache *kc = calloc(1, sizeof(*kc));
	if (!kc)
		return NULL;
	kc->nbuckets = 1024;
	kc->tab = calloc(kc->nbuckets, sizeof(*kc->tab));
	if (!kc->tab) {
		free(kc);
		return NULL;
	}
	pthread_mutex_init(&kc->lock, NULL);
	pthread_cond_init(&kc->wake, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&kc->idle, &ca);
	pthread_condattr_destroy(&ca);
	kc->tail = &kc->head;
	kc->joined = true;
	return kc;
}

static void free_items(struct kitem *it)
{
	while (it) {
		struct kitem *next = it->next;
		free(it);
		it = next;
	}
}

void mbfs_kcache_free(struct mbfs_kcache *kc)
{
	if (!kc || !kc->joined)
		return;   /* a thread stuck in the kernel still uses it */
	for (size_t i = 0; i < kc->nbuckets; i++) {
		struct kpath *p = kc->tab[i], *next;
		for (; p; p = next) {
			next = p->next;
			free(p);
		}
	}
	free(kc->tab);
	free_items(kc->head);
	free_items(kc->names_q);
	pthread_cond_destroy(&kc->idle);
	pthread_cond_destroy(&kc->wake);
	pthread_mutex_destroy(&kc->lock);
	free(kc);
}

/* Lock held, for the helpers below. */
static struct kpath *find_locked(struct mbfs_kcache *kc, const char *path,
				 uint64_t h)
{
	for (struct kpath *p = kc->tab[h % kc->nbuckets]; p; p = p->next)
		if (p->hash == h && strcmp(p->path, path) == 0)
			return p;
	return NULL;
}

static void grow_locked(struct mbfs_kcache *kc)
{
	size_t nb = kc->nbuckets * 2;
	struct kpath **t = calloc(nb, sizeof(*t));
	if (!t)
		return;
	for (size_t i = 0; i < kc->nbuckets; i++) {
		struct kpath *p = kc->tab[i], *next;
		for (; p; p = next) {
			next = p->next;
			p->next = t[p->hash % nb];
			t[p->hash % nb] = p;
		}
	}
	free(kc->tab);
	kc->tab = t;
	kc->nbuckets = nb;
}

/* Remember path (seen now); the entry, or NULL when full or out of
 * memory. */
static struct kpath *add_locked(struct mbfs_kcache *kc, const char *path,
				unsigned type)
{
	uint64_t h = hash_path(path);
	struct kpath *p = find_locked(kc, path, h);
	if (p) {
		p->gen = ++kc->gen;
		if (type)
			p->type = type;
		return p;
	}
	if (kc->count >= MBFS_KCACHE_MAX) {
		if (!kc->full_logged)
			mb_log(MB_LOG_DEBUG, "kernel cache: %u paths remembered, "
			       "no more", MBFS_KCACHE_MAX);
		kc->full_logged = true;
		return NULL;
	}
	if (kc->count >= kc->nbuckets * 2)
		grow_locked(kc);
	size_t n = strlen(path) + 1;
	p = malloc(sizeof(*p) + n);
	if (!p)
		return NULL;
	memcpy(p->path, path, n);
	p->hash = h;
	p->gen = ++kc->gen;
	p->type = type;
	p->missing_until = 0;
	p->queued = false;
	p->next = kc->tab[h % kc->nbuckets];
	kc->tab[h % kc->nbuckets] = p;
	kc->count++;
	return p;
}

static void queue_locked(struct mbfs_kcache *kc, struct kpath *p)
{
	if (p->queued)
		return;
	size_t n = strlen(p->path) + 1;
	struct kitem *it = malloc(sizeof(*it) + n);
	if (!it)
		return;   /* the kernel's copy expires with its timeout */
	memcpy(it->path, p->path, n);
	it->gen = p->gen;
	it->next = NULL;
	*kc->tail = it;
	kc->tail = &it->next;
	p->queued = true;
	kc->asked++;
	pthread_cond_signal(&kc->wake);
}

bool mbfs_kcache_seen(struct mbfs_kcache *kc, const char *path, mode_t mode)
{
	if (!kc)
		return false;
	unsigned type = (unsigned)(mode & S_IFMT);
	pthread_mutex_lock(&kc->lock);
	struct kpath *p = find_locked(kc, path, hash_path(path));
	bool retyped = p && p->type && type && p->type != type;
	p = add_locked(kc, path, type);
	if (p)
		p->missing_until = 0;
	pthread_mutex_unlock(&kc->lock);
	return retyped;
}

void mbfs_kcache_moved(struct mbfs_kcache *kc, const char *from,
		       const char *to)
{
	if (!kc || strcmp(from, "/") == 0)
		return;
	size_t n = strlen(from), tn = strlen(to);
	char buf[MB_PATH_MAX];
	pthread_mutex_lock(&kc->lock);
	struct kpath *self = find_locked(kc, from, hash_path(from));
	/* a file or a link moved has nothing below it: what is remembered
	 * there is stale (of a directory once at that name) */
	bool leaf = self && self->type && !S_ISDIR(self->type);
	/* unhook the moved entries first: re-adding may grow the table; what
	 * the rename replaced at to (a file, or an empty directory) and below
	 * it goes, or a later name there of another type would be taken for
	 * one the kernel holds retyped (ESTALE, then EEXIST) */
	struct kpath *moved = NULL;
	for (size_t i = 0; i < kc->nbuckets; i++) {
		struct kpath **pp = &kc->tab[i];
		while (*pp) {
			struct kpath *p = *pp;
			bool mv = under(p->path, from, n);
			if (mv || under(p->path, to, tn)) {
				*pp = p->next;
				kc->count--;
				if (mv && !(leaf && p != self)) {
					p->next = moved;
					moved = p;
				} else {
					free(p);
				}
			} else {
				pp = &p->next;
			}
		}
	}
	while (moved) {
		struct kpath *p = moved;
		moved = p->next;
		int r = snprintf(buf, sizeof(buf), "%s%s", to, p->path + n);
		struct kpath *q = r > 0 && (size_t)r < sizeof(buf)
				  ? add_locked(kc, buf, p->type) : NULL;
		if (q)   /* a name held as missing stays so, not "shown" */
			q->missing_until = p->missing_until;
		free(p);
	}
	pthread_mutex_unlock(&kc->lock);
}

bool mbfs_kcache_gone(struct mbfs_kcache *kc, const char *path)
{
	if (!kc || strcmp(path, "/") == 0)
		return false;
	uint64_t h = hash_path(path);
	bool known = false;
	pthread_mutex_lock(&kc->lock);
	struct kpath **pp = &kc->tab[h % kc->nbuckets];
	for (; *pp; pp = &(*pp)->next) {
		struct kpath *p = *pp;
		if (p->hash == h && strcmp(p->path, path) == 0) {
			if (p->missing_until)
				break;   /* the kernel holds it as missing */
			*pp = p->next;
			known = p->gen > kc->epoch_gen;
			free(p);
			kc->count--;
			break;
		}
	}
	pthread_mutex_unlock(&kc->lock);
	return known;
}

void mbfs_kcache_stale(struct mbfs_kcache *kc, const char *path)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	struct kpath *p = find_locked(kc, path, hash_path(path));
	if (p)
		queue_locked(kc, p);
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_drop_name(struct mbfs_kcache *kc, const char *path)
{
	size_t n = strlen(path) + 1;
	struct kitem *it = kc ? malloc(sizeof(*it) + n) : NULL;
	if (!it)
		return;   /* the name expires with the timeouts */
	memcpy(it->path, path, n);
	pthread_mutex_lock(&kc->lock);
	it->gen = kc->gen;
	it->next = kc->names_q;
	kc->names_q = it;
	kc->asked++;
	pthread_cond_signal(&kc->wake);
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_stale_tree(struct mbfs_kcache *kc, const char *path)
{
	if (!kc)
		return;
	size_t n = strlen(path);
	pthread_mutex_lock(&kc->lock);
	for (size_t i = 0; i < kc->nbuckets; i++)
		for (struct kpath *p = kc->tab[i]; p; p = p->next)
			if (under(p->path, path, n))
				queue_locked(kc, p);
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_stale_all(struct mbfs_kcache *kc)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	kc->all = true;
	kc->names = kc->epochs;
	kc->asked++;
	pthread_cond_signal(&kc->wake);
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_use_epochs(struct mbfs_kcache *kc, uint64_t neg_ms)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	kc->epochs = true;
	kc->neg_ms = neg_ms;
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_missing(struct mbfs_kcache *kc, const char *path)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	struct kpath *p = kc->epochs ? add_locked(kc, path, 0) : NULL;
	if (p)
		p->missing_until = mb_now_ms() + kc->neg_ms;
	pthread_mutex_unlock(&kc->lock);
}

void mbfs_kcache_appeared(struct mbfs_kcache *kc, const char *path)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	struct kpath *p = kc->epochs ? find_locked(kc, path, hash_path(path))
				     : NULL;
	if (p && p->missing_until > mb_now_ms()) {
		p->missing_until = 0;
		if (!kc->names) {
			kc->names = true;
			kc->asked++;
			pthread_cond_signal(&kc->wake);
		}
	}
	pthread_mutex_unlock(&kc->lock);
}

/* Every name the kernel holds is to be looked up again. */
static void new_epoch(struct mbfs_kcache *kc)
{
	struct notify_header h = { sizeof(h), NOTIFY_INC_EPOCH, 0 };
	int rc = kc->kernel->notify(&h, sizeof(h));
	if (rc)
		mb_log(MB_LOG_DEBUG, "kernel cache: cannot drop names: %s",
		       strerror(-rc));
}

/* Everything remembered, as items (queued marks cleared); NULL without
 * memory for some (those expire with the timeouts). Lock held. */
static struct kitem *snapshot_locked(struct mbfs_kcache *kc)
{
	struct kitem *list = NULL;
	for (size_t i = 0; i < kc->nbuckets; i++) {
		for (struct kpath *p = kc->tab[i]; p; p = p->next) {
			size_t n = strlen(p->path) + 1;
			struct kitem *it = malloc(sizeof(*it) + n);
			p->queued = false;
			if (!it)
				continue;
			memcpy(it->path, p->path, n);
			it->gen = p->gen;
			it->next = list;
			list = it;
		}
	}
	return list;
}

/* the kernel holds no inode for path: forget it, unless seen since gen. */
static void forget(struct mbfs_kcache *kc, const char *path, uint64_t gen)
{
	uint64_t h = hash_path(path);
	pthread_mutex_lock(&kc->lock);
	struct kpath **pp = &kc->tab[h % kc->nbuckets];
	for (; *pp; pp = &(*pp)->next) {
		struct kpath *p = *pp;
		if (p->hash == h && strcmp(p->path, path) == 0) {
			if (p->gen == gen && !p->queued &&
			    p->missing_until <= mb_now_ms()) {
				*pp = p->next;
				free(p);
				kc->count--;
			}
			break;
		}
	}
	pthread_mutex_unlock(&kc->lock);
}

static void *run(void *arg)
{
	struct mbfs_kcache *kc = arg;
	pthread_mutex_lock(&kc->lock);
	for (;;) {
		while (!kc->stop && !kc->head && !kc->all && !kc->names &&
		       !kc->names_q)
			pthread_cond_wait(&kc->wake, &kc->lock);
		if (kc->stop)
			break;
		uint64_t upto = kc->asked;
		struct kitem *drop = kc->names_q;
		kc->names_q = NULL;
		bool names = kc->names;
		kc->names = false;
		struct kitem *list = kc->head;
		kc->head = NULL;
		kc->tail = &kc->head;
		if (kc->all) {
			/* the copy covers what was queued */
			free_items(list);
			list = snapshot_locked(kc);
			kc->all = false;
		} else {
			for (struct kitem *it = list; it; it = it->next) {
				struct kpath *p = find_locked(kc, it->path,
							      hash_path(it->path));
				if (p)
					p->queued = false;
			}
		}
		pthread_mutex_unlock(&kc->lock);
		/* names first: the attributes asked for next are then of the
		 * inodes the names lead to now */
		for (struct kitem *it = drop; it; it = it->next) {
			kc->kernel->invalidate_name(it->path);
			/* and the inode the name leads to now: its size and
			 * pages are the file's that moved there */
			kc->kernel->invalidate(it->path);
		}
		free_items(drop);
		if (names) {
			new_epoch(kc);
			pthread_mutex_lock(&kc->lock);
			kc->epoch_gen = kc->gen;
			pthread_mutex_unlock(&kc->lock);
		}
		for (struct kitem *it = list; it; it = it->next) {
			if (__atomic_load_n(&kc->stop, __ATOMIC_RELAXED))
				break;
			/* attributes and every page; -ENOENT: no inode of
			 * the kernel has that path, so it holds nothing */
			int rc = kc->kernel->invalidate(it->path);
			if (rc == -ENOENT)
				forget(kc, it->path, it->gen);
		}
		free_items(list);
		pthread_mutex_lock(&kc->lock);
		kc->done = upto;
		pthread_cond_broadcast(&kc->idle);
	}
	kc->running = false;
	pthread_cond_broadcast(&kc->idle);
	pthread_mutex_unlock(&kc->lock);
	return NULL;
}

int mbfs_kcache_start(struct mbfs_kcache *kc, const struct mbfs_kernel *k)
{
	if (!kc || !k)
		return -EINVAL;
	pthread_mutex_lock(&kc->lock);
	if (kc->running || !kc->joined) {
		pthread_mutex_unlock(&kc->lock);
		return -EALREADY;
	}
	kc->kernel = k;
	kc->stop = false;
	int rc = pthread_create(&kc->thread, NULL, run, kc);
	if (rc == 0) {
		kc->running = true;
		kc->joined = false;
	}
	pthread_mutex_unlock(&kc->lock);
	return -rc;
}

void mbfs_kcache_stop(struct mbfs_kcache *kc)
{
	if (!kc)
		return;
	pthread_mutex_lock(&kc->lock);
	if (kc->joined) {
		pthread_mutex_unlock(&kc->lock);
		return;
	}
	__atomic_store_n(&kc->stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&kc->wake);
	/* the kernel may hold the thread on a page whose read nobody will
	 * answer any more (a signal ended the loop): wait a while, then
	 * leave it (unmounting ends that read, and the thread) */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += JOIN_WAIT_MS / 1000;
	while (kc->running &&
	       pthread_cond_timedwait(&kc->idle, &kc->lock, &ts) != ETIMEDOUT)
		;
	bool ended = !kc->running;
	pthread_mutex_unlock(&kc->lock);
	if (!ended) {
		mb_log(MB_LOG_DEBUG, "kernel cache thread still busy at stop");
		return;   /* tried again by a later stop */
	}
	pthread_join(kc->thread, NULL);
	pthread_mutex_lock(&kc->lock);
	kc->joined = true;
	free_items(kc->head);
	kc->head = NULL;
	free_items(kc->names_q);
	kc->names_q = NULL;
	kc->tail = &kc->head;
	kc->all = false;
	kc->names = false;
	pthread_mutex_unlock(&kc->lock);
}

bool mbfs_kcache_wait(struct mbfs_kcache *kc, unsigned timeout_ms)
{
	if (!kc)
		return false;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&kc->lock);
	uint64_t target = kc->asked;
	while (kc->running && kc->done < target &&
	       pthread_cond_timedwait(&kc->idle, &kc->lock, &ts) != ETIMEDOUT)
		;
	bool ok = kc->running && kc->done >= target;
	pthread_mutex_unlock(&kc->lock);
	return ok;
}
