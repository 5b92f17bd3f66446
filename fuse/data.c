/* data.c: the local cache directory (see data.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/data.h"

struct dentry {
	struct dentry *next;
	char *path;
	uint64_t size;
	time_t mtime;
	char *local;
};

struct mbfs_data {
	pthread_mutex_t lock;
	char *datadir, *keptdir;
	struct dentry *head;        /* newest first; protected by lock */
	uint64_t total;             /* bytes indexed; protected by lock */
	uint64_t cap;
	unsigned long seq;          /* protected by lock */
};

static void empty_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) < (int)sizeof(p))
			unlink(p);
	}
	closedir(dp);
}

int mbfs_data_new(const char *dir, uint64_t cap, struct mbfs_data **out,
		  struct mb_err *err)
{
	struct mbfs_data *d = calloc(1, sizeof(*d));
	if (!d)
		return mb_err_set(err, ENOMEM, "out of memory");
	if (asprintf(&d->datadir, "%s/data", dir) < 0 ||
	    asprintf(&d->keptdir, "%s/kept", dir) < 0) {
		free(d->datadir);
		free(d);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	int rc = mb_mkdir_p(d->datadir, 0700);
	if (!rc)
		rc = mb_mkdir_p(d->keptdir, 0700);
	if (rc) {
		mb_err_set(err, -rc, "cannot create cache directory '%s': %s",
			   dir, strerror(-rc));
		free(d->datadir);
		free(d->keptdir);
		free(d);
		return rc;
	}
	empty_dir(d->datadir);
	pthread_mutex_init(&d->lock, NULL);
	d->cap = cap;
	*out = d;
	return 0;
}

static void free_dentry(struct dentry *e, bool unlink_file)
{
	if (unlink_file)
		unlink(e->local);
	free(e->local);
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
		free_dentry(e, true);
	}
	empty_dir(d->datadir);
	pthread_mutex_destroy(&d->lock);
	free(d->datadir);
	free(d->keptdir);
	free(d);
}

int mbfs_data_newfile(struct mbfs_data *d, char **local, int *fd)
{
	char hex[17];
	if (mb_random_hex(hex, 8))
		return -EIO;
	pthread_mutex_lock(&d->lock);
	unsigned long seq = ++d->seq;
	pthread_mutex_unlock(&d->lock);
	char *p;
	if (asprintf(&p, "%s/%lu-%s", d->datadir, seq, hex) < 0)
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

/* Unlink entry e (pointed to by *pp) from the index. Lock held. */
static struct dentry *unlink_at(struct mbfs_data *d, struct dentry **pp)
{
	struct dentry *e = *pp;
	*pp = e->next;
	d->total -= e->size;
	return e;
}

int mbfs_data_take(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char **local)
{
	struct dentry *got = NULL;
	pthread_mutex_lock(&d->lock);
	for (struct dentry **pp = &d->head; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->path, path) == 0) {
			got = unlink_at(d, pp);
			break;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (!got)
		return 0;
	if (got->size != size || got->mtime != mtime) {
		free_dentry(got, true);
		return 0;
	}
	*local = got->local;
	got->local = NULL;
	free(got->path);
	free(got);
	return 1;
}

void mbfs_data_put(struct mbfs_data *d, const char *path, uint64_t size,
		   time_t mtime, char *local)
{
	struct dentry *e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path))) {
		free(e);
		mbfs_data_discard(local);
		return;
	}
	e->size = size;
	e->mtime = mtime;
	e->local = local;
	struct dentry *old = NULL, *evict = NULL;
	pthread_mutex_lock(&d->lock);
	for (struct dentry **pp = &d->head; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->path, path) == 0) {
			old = unlink_at(d, pp);
			break;
		}
	}
	e->next = d->head;
	d->head = e;
	d->total += size;
	/* evict oldest (the tail) while over the cap, never the new one */
	while (d->total > d->cap && d->head->next) {
		struct dentry **pp = &d->head;
		while ((*pp)->next)
			pp = &(*pp)->next;
		struct dentry *t = unlink_at(d, pp);
		t->next = evict;
		evict = t;
	}
	pthread_mutex_unlock(&d->lock);
	if (old)
		free_dentry(old, true);
	while (evict) {
		struct dentry *n = evict->next;
		free_dentry(evict, true);
		evict = n;
	}
}

static void drop_matching(struct mbfs_data *d, const char *path, bool tree)
{
	size_t n = strlen(path);
	struct dentry *gone = NULL;
	pthread_mutex_lock(&d->lock);
	struct dentry **pp = &d->head;
	while (*pp) {
		const char *p = (*pp)->path;
		bool match = tree ? (strncmp(p, path, n) == 0 &&
				     (p[n] == '\0' || p[n] == '/' ||
				      strcmp(path, "/") == 0))
				  : strcmp(p, path) == 0;
		if (match) {
			struct dentry *e = unlink_at(d, pp);
			e->next = gone;
			gone = e;
		} else {
			pp = &(*pp)->next;
		}
	}
	pthread_mutex_unlock(&d->lock);
	while (gone) {
		struct dentry *nx = gone->next;
		free_dentry(gone, true);
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

int mbfs_data_keep(struct mbfs_data *d, const char *rpath, int fd,
		   uint64_t size, char *out, size_t outsz)
{
	const char *base = strrchr(rpath, '/');
	base = base ? base + 1 : rpath;
	char stamp[32], hex[9];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (mb_random_hex(hex, 4))
		strcpy(hex, "0");
	if (snprintf(out, outsz, "%s/%.100s.%s.%s", d->keptdir, base, stamp,
		     hex) >= (int)outsz)
		return -ENAMETOOLONG;
	int o = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (o < 0)
		return -errno;
	char buf[65536];
	uint64_t off = 0;
	int rc = 0;
	while (off < size) {
		size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		if (write(o, buf, (size_t)n) != n) {
			rc = -errno ? -errno : -EIO;
			break;
		}
		off += (uint64_t)n;
	}
	if (close(o) && !rc)
		rc = -errno;
	return rc;
}
