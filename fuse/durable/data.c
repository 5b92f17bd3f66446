/* data.c: the mount's local copies of file contents (see data.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/durable/data.h"
#include "fuse/mbfs.h"

/* An entry is in the LRU list (newest first) and in its hash chain. */
struct dentry {
	struct dentry *prev, *next;
	struct dentry *hnext;
	uint64_t hash;
	char *path;
	uint64_t size;
	time_t mtime;
	char *local;
	int mfd;         /* a copy in memory (mbfs_data_memfile), or -1 */
};

/* Slots of the record of local changes (mbfs_data_put_fetched): a slot
 * shared by two paths only makes a fetched copy be dropped needlessly. */
#define CHANGE_SLOTS 16384u
#define BUCKETS 16384u

struct mbfs_data {
	pthread_mutex_t lock;
	char *datadir;
	struct dentry *head, *tail; /* newest first; protected by lock */
	struct dentry *tab[BUCKETS];   /* by path; protected by lock */
	uint64_t total;             /* bytes of the copies on disk; by lock */
	uint64_t cap;
	unsigned long seq;          /* protected by lock */
	/* local changes, by lock: a stamp per slot of a path's hash, and one
	 * for the drops of a whole tree */
	uint64_t stamp, tree_stamp, changed[CHANGE_SLOTS];
	/* files emptied for reuse, by lock: a storm of small files (git's
	 * objects, written then renamed or linked and removed) makes and
	 * deletes one per file, and an inode made costs more than an
	 * emptied one reused (much more on ext4 without a journal, which
	 * scans past the inodes deleted in the last seconds) */
	char *spare[SPARE_MAX];
	size_t nspare;
	uint64_t mem_total;   /* bytes of the copies in memory; by lock */
	size_t mem_count;     /* copies in memory (an open fd each); by lock */
	size_t mem_files;     /* at most this many: a quarter of the fds */
};

static uint64_t *slot_locked(struct mbfs_data *d, const char *path)
{
	return &d->changed[mbfs_fnv1a(MBFS_FNV_OFFSET, path) % CHANGE_SLOTS];
}

int mbfs_data_new(const char *dir, uint64_t cap, struct mbfs_data **out,
		  struct mb_err *err)
{
	struct mbfs_data *d = calloc(1, sizeof(*d));
	if (!d || !(d->datadir = strdup(dir))) {
		free(d);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	pthread_mutex_init(&d->lock, NULL);
	d->cap = cap;
	struct rlimit rl;
	d->mem_files = MBFS_DATA_MEM_FILES;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < d->mem_files)
		d->mem_files = (size_t)(rl.rlim_cur / 4);
	*out = d;
	return 0;
}

static void free_dentry(struct mbfs_data *d, struct dentry *e)
{
	if (e->mfd >= 0)
		close(e->mfd);
	mbfs_data_recycle(d, e->local);
	free(e->path);
	free(e);
}

void mbfs_data_free(struct mbfs_data *d)
{
	if (!d)
		return;
	struct dentry *e = d->head, *n;
	for (; e; e = n) {
		n = e->next;
		free_dentry(NULL, e);
	}
	for (size_t i = 0; i < d->nspare; i++)
		mbfs_data_discard(d->spare[i]);
	pthread_mutex_destroy(&d->lock);
	free(d->datadir);
	free(d);
}

/* A spare file, open, or -1. */
static int take_spare(struct mbfs_data *d, char **local)
{
	for (;;) {
		pthread_mutex_lock(&d->lock);
		char *p = d->nspare ? d->spare[--d->nspare] : NULL;
		pthread_mutex_unlock(&d->lock);
		if (!p)
			return -1;
		int f = open(p, O_RDWR | O_CLOEXEC);
		if (f >= 0) {
			*local = p;
			return f;
		}
		mbfs_data_discard(p);
	}
}

/* A new name in the data directory (malloc'd), or NULL. */
static char *new_name(struct mbfs_data *d)
{
	char hex[17], *p;
	if (mb_random_hex(hex, 8))
		return NULL;
	pthread_mutex_lock(&d->lock);
	unsigned long seq = ++d->seq;
	pthread_mutex_unlock(&d->lock);
	return asprintf(&p, "%s/%lu-%s", d->datadir, seq, hex) < 0 ? NULL : p;
}

int mbfs_data_newfile(struct mbfs_data *d, char **local, int *fd)
{
	if ((*fd = take_spare(d, local)) >= 0)
		return 0;
	char *p = new_name(d);
	if (!p)
		return -ENOMEM;
	int f = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (f < 0) {
		int e = errno;
		mb_log(MB_LOG_ERR, "cannot create cache file '%s': %s", p,
		       strerror(e));
		free(p);
		return -e;
	}
	*local = p;
	*fd = f;
	return 0;
}

int mbfs_data_linkfile(struct mbfs_data *d, const char *from, char **local,
		       int *fd)
{
	char *p = new_name(d);
	if (!p)
		return -ENOMEM;
	int f = link(from, p) ? -1 : open(p, O_RDWR | O_CLOEXEC);
	if (f < 0) {
		int e = errno;
		unlink(p);
		free(p);
		return -e;
	}
	*local = p;
	*fd = f;
	return 0;
}

bool mbfs_data_shared(int fd)
{
	struct stat st;
	return fstat(fd, &st) || st.st_nlink > 1;
}

/* The entry of path, or NULL. Lock held. */
static struct dentry *find_locked(struct mbfs_data *d, const char *path)
{
	uint64_t h = mbfs_fnv1a(MBFS_FNV_OFFSET, path);
	for (struct dentry *e = d->tab[h % BUCKETS]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

/* Take e out of the index. Lock held. */
static struct dentry *unlink_locked(struct mbfs_data *d, struct dentry *e)
{
	struct dentry **pp = &d->tab[e->hash % BUCKETS];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
	e->prev = e->next = e->hnext = NULL;
	if (e->mfd >= 0) {
		d->mem_total -= e->size;
		d->mem_count--;
	} else {
		d->total -= e->size;
	}
	return e;
}

/* Put e in the index as the newest. Lock held. */
static void insert_locked(struct mbfs_data *d, struct dentry *e)
{
	e->hash = mbfs_fnv1a(MBFS_FNV_OFFSET, e->path);
	e->hnext = d->tab[e->hash % BUCKETS];
	d->tab[e->hash % BUCKETS] = e;
	e->prev = NULL;
	e->next = d->head;
	if (d->head)
		d->head->prev = e;
	else
		d->tail = e;
	d->head = e;
	if (e->mfd >= 0) {
		d->mem_total += e->size;
		d->mem_count++;
	} else {
		d->total += e->size;
	}
}

int mbfs_data_take(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char **local, int *mfd)
{
	pthread_mutex_lock(&d->lock);
	struct dentry *got = find_locked(d, path);
	if (got)
		unlink_locked(d, got);
	pthread_mutex_unlock(&d->lock);
	if (!got)
		return 0;
	if (got->size != size || got->mtime != mtime) {
		free_dentry(d, got);
		return 0;
	}
	*local = got->local;
	*mfd = got->mfd;
	got->local = NULL;
	free(got->path);
	free(got);
	return 1;
}

/* Unlink the oldest entries (the tail) into a list until want bytes are
 * freed and the total is within cap; for the cap alone (want 0) never the
 * newest entry, which was just put. Lock held. */
static struct dentry *evict_locked(struct mbfs_data *d, uint64_t want,
				   uint64_t cap, uint64_t *freed)
{
	struct dentry *out = NULL;
	*freed = 0;
	while (d->tail && (*freed < want || d->total > cap) &&
	       (want || d->tail != d->head)) {
		struct dentry *t = unlink_locked(d, d->tail);
		if (t->mfd < 0)   /* a copy in memory frees no disk */
			*freed += t->size;
		t->next = out;
		out = t;
	}
	return out;
}

static void free_list(struct mbfs_data *d, struct dentry *e)
{
	while (e) {
		struct dentry *n = e->next;
		free_dentry(d, e);
		e = n;
	}
}

/* The free space of the cache's disk, or UINT64_MAX when unknown. */
static uint64_t disk_avail(const struct mbfs_data *d)
{
	struct statvfs sv;
	if (statvfs(d->datadir, &sv))
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Delete a copy that is not indexed: the file local, or with local NULL
 * the copy in memory mfd. */
static void discard_copy(char *local, int mfd)
{
	if (!local && mfd >= 0)
		close(mfd);
	mbfs_data_discard(local);
}

/* Index the copy (local, or mfd when local is NULL) of path. */
static void put_copy(struct mbfs_data *d, const char *path, uint64_t size,
		     time_t mtime, char *local, int mfd)
{
	struct dentry *e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path)) ||
	    (!local && !mbfs_data_mem_room(d, size))) {
		if (e)
			free(e->path);
		free(e);
		discard_copy(local, mfd);
		return;
	}
	e->size = size;
	e->mtime = mtime;
	e->local = local;
	e->mfd = local ? -1 : mfd;
	struct dentry *old = NULL, *evict = NULL;
	uint64_t avail = disk_avail(d), cap = d->cap, freed;
	pthread_mutex_lock(&d->lock);
	if ((old = find_locked(d, path)))
		unlink_locked(d, old);
	insert_locked(d, e);
	/* the cap follows the disk: clean copies use at most half of what
	 * they and the free space add up to, so writes keep room */
	if (avail != UINT64_MAX && (d->total + avail) / 2 < cap)
		cap = (d->total + avail) / 2;
	evict = evict_locked(d, 0, cap, &freed);
	pthread_mutex_unlock(&d->lock);
	if (old)
		free_dentry(d, old);
	free_list(d, evict);
}

bool mbfs_data_mem_room(struct mbfs_data *d, uint64_t size)
{
	if (size > MBFS_DATA_MEM_FILE)
		return false;
	pthread_mutex_lock(&d->lock);
	bool room = d->mem_total + size <= MBFS_DATA_MEM_CAP &&
		    d->mem_count < d->mem_files;
	pthread_mutex_unlock(&d->lock);
	return room;
}

int mbfs_data_memfile(int *fd)
{
	*fd = memfd_create("mbfs-copy", MFD_CLOEXEC);
	return *fd < 0 ? -errno : 0;
}

uint64_t mbfs_data_stamp(struct mbfs_data *d)
{
	pthread_mutex_lock(&d->lock);
	uint64_t s = d->stamp;
	pthread_mutex_unlock(&d->lock);
	return s;
}

void mbfs_data_put_clean(struct mbfs_data *d, const char *path, uint64_t size,
			 time_t mtime, char *local, int mfd, uint64_t since)
{
	pthread_mutex_lock(&d->lock);
	bool stale = d->tree_stamp > since || *slot_locked(d, path) > since;
	pthread_mutex_unlock(&d->lock);
	if (stale)
		discard_copy(local, mfd);
	else
		put_copy(d, path, size, mtime, local, mfd);
}

void mbfs_data_put_fetched(struct mbfs_data *d, const char *path,
			   uint64_t size, time_t mtime, char *local, int mfd,
			   uint64_t since)
{
	pthread_mutex_lock(&d->lock);
	bool stale = d->tree_stamp > since || *slot_locked(d, path) > since ||
		     find_locked(d, path);
	pthread_mutex_unlock(&d->lock);
	/* a copy of our own, or a change made here since the fetch began,
	 * is newer than what the fetch found: keep it */
	if (stale)
		discard_copy(local, mfd);
	else
		put_copy(d, path, size, mtime, local, mfd);
}

static void drop_matching(struct mbfs_data *d, const char *path, bool tree)
{
	size_t n = strlen(path);
	struct dentry *gone = NULL;
	pthread_mutex_lock(&d->lock);
	if (tree)
		d->tree_stamp = ++d->stamp;
	else
		*slot_locked(d, path) = ++d->stamp;
	if (!tree) {
		if ((gone = find_locked(d, path)))
			unlink_locked(d, gone);
	}
	for (struct dentry *e = tree ? d->head : NULL, *nx; e; e = nx) {
		const char *p = e->path;
		nx = e->next;
		if (strncmp(p, path, n) == 0 &&
		    (p[n] == '\0' || p[n] == '/' || strcmp(path, "/") == 0)) {
			unlink_locked(d, e);
			e->next = gone;
			gone = e;
		}
	}
	pthread_mutex_unlock(&d->lock);
	while (gone) {
		struct dentry *nx = gone->next;
		free_dentry(d, gone);
		gone = nx;
	}
}

void mbfs_data_drop(struct mbfs_data *d, const char *path)
{
	drop_matching(d, path, false);
}

void mbfs_data_drop_tree(struct mbfs_data *d, const char *path)
{
	drop_matching(d, path, true);
}

void mbfs_data_drop_all(struct mbfs_data *d)
{
	drop_matching(d, "/", true);
}

void mbfs_data_discard(char *local)
{
	if (!local)
		return;
	unlink(local);
	free(local);
}

void mbfs_data_recycle(struct mbfs_data *d, char *local)
{
	struct stat st;
	/* another name's data is never emptied */
	if (local && d && stat(local, &st) == 0 && st.st_nlink == 1 &&
	    truncate(local, 0) == 0) {
		pthread_mutex_lock(&d->lock);
		if (d->nspare < SPARE_MAX) {
			d->spare[d->nspare++] = local;
			local = NULL;
		}
		pthread_mutex_unlock(&d->lock);
	}
	mbfs_data_discard(local);
}

uint64_t mbfs_data_evict(struct mbfs_data *d, uint64_t want)
{
	uint64_t freed;
	pthread_mutex_lock(&d->lock);
	struct dentry *gone = evict_locked(d, want ? want : 1, UINT64_MAX, &freed);
	pthread_mutex_unlock(&d->lock);
	if (gone)
		mb_log(MB_LOG_DEBUG, "the cache's disk is full: %llu bytes of "
		       "clean copies removed", (unsigned long long)freed);
	free_list(d, gone);
	return freed;
}
