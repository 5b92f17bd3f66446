/* relist.c: follow.sh's listings, and the directories noted at a
 * command's end listed again in one exec (relist.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "common/api.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/bulk/relist.h"
#include "fuse/cache/cache.h"
#include "fuse/mbfs.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/transport/remote.h"

#define BIG_DIRS 16
#define COLD_RUNS 8

struct mbfs_relist {
	pthread_mutex_t lock;
	pthread_cond_t done;
	char (*dirs)[MB_PATH_MAX];   /* noted, MBFS_RELIST_ALL long */
	size_t nd;
	char (*run)[MB_PATH_MAX];    /* being listed, MBFS_RELIST_ALL long */
	size_t nrun;                 /* 0: no relist is asking the guest */
	/* directories a cold listing found too large lately (hash of the
	 * path, when), a ring */
	struct { uint64_t hash, at; } big[BIG_DIRS];
	unsigned big_next;
	/* cold listings asking the guest (hash of the path; 0: free): the
	 * lookups of one directory, in parallel, share one */
	uint64_t cold[COLD_RUNS];
};

struct mbfs_relist *mbfs_relist_new(void)
{
	struct mbfs_relist *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->dirs = calloc(MBFS_RELIST_ALL, sizeof(*r->dirs));
	r->run = calloc(MBFS_RELIST_ALL, sizeof(*r->run));
	if (!r->dirs || !r->run) {
		free(r->dirs);
		free(r->run);
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->done, NULL);
	return r;
}

void mbfs_relist_free(struct mbfs_relist *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->done);
	free(r->dirs);
	free(r->run);
	free(r);
}

static enum mb_ftype ftype_of(char c)
{
	switch (c) {
	case 'f': return MB_FT_FILE;
	case 'd': return MB_FT_DIR;
	case 'l': return MB_FT_SYMLINK;
	case 'p': return MB_FT_FIFO;
	case 's': return MB_FT_SOCKET;
	case 'c': return MB_FT_CHAR;
	case 'b': return MB_FT_BLOCK;
	default: return MB_FT_OTHER;
	}
}

/* One entry line of follow.sh ("DEPTH TYPE MODE UID GID SIZE MTIME
 * PATH", MTIME with find's fraction) into e, its depth into *depth, its
 * guest path into *path (in line). false when not understood. */
static bool parse_entry(char *line, struct mb_entry *e, unsigned *depth,
			char **path)
{
	char t, frac[32] = "";
	unsigned mode, uid, gid;
	unsigned long long size;
	long long mtime;
	int at = -1;
	memset(e, 0, sizeof(*e));
	/* the path is the rest of the line after one space */
	if (sscanf(line, "%u %c %o %u %u %llu %lld%31[.0-9]%n", depth, &t,
		   &mode, &uid, &gid, &size, &mtime, frac, &at) != 8 ||
	    at < 0 || *depth > 1 ||
	    line[at] != ' ' || line[at + 1] != '/' || frac[0] != '.')
		return false;
	long ns = mb_frac_nsec(frac + 1, strlen(frac + 1));
	if (ns < 0)
		return false;
	e->type = ftype_of(t);
	e->mode = mode & 07777;
	e->uid = uid;
	e->gid = gid;
	e->size = size;
	/* find prints the second, then the nanoseconds after it: 0.25 s
	 * before the epoch is -1.75 */
	e->mtime = (time_t)mtime;
	e->mtime_nsec = ns;
	e->mtime_exact = true;
	*path = line + at + 1;
	return true;
}

/* Which of the nd guest directories rdir names; nd when none. */
static size_t dir_index(char (*rdirs)[MB_PATH_MAX], size_t nd,
			const char *rdir)
{
	for (size_t i = 0; i < nd; i++)
		if (strcmp(rdirs[i], rdir) == 0)
			return i;
	return nd;
}

/* U+FFFD in UTF-8 */
#define REPLACEMENT "\xef\xbf\xbd"

size_t mbfs_relist_take(struct mbfs *fs, char *text,
			char (*dirs)[MB_PATH_MAX], char (*rdirs)[MB_PATH_MAX],
			size_t nd, uint64_t ctr, size_t max_kids, bool follow,
			bool *big)
{
	struct mb_entry_list *lists = calloc(nd, sizeof(*lists));
	size_t *cap = calloc(nd, sizeof(*cap));
	bool *odd = calloc(nd, sizeof(*odd));
	struct mb_entry *own = calloc(nd, sizeof(*own));   /* each MB_FT_DIR if given */
	bool whole = false;
	size_t put = 0;
	char *line = mb_next_line(&text);
	if (!lists || !cap || !odd || !own || !line || strcmp(line, "@") != 0)
		goto out;
	while ((line = mb_next_line(&text))) {
		if (strcmp(line, ".") == 0) {
			whole = true;
			break;
		}
		if (line[0] == '!' && line[1] == ' ') {
			/* find's %h of an entry of / is empty */
			size_t i = dir_index(rdirs, nd, line[2] ? line + 2 : "/");
			for (size_t j = 0; j < nd; j++)   /* unknown: none */
				if (i == nd || j == i)
					odd[j] = true;
			continue;
		}
		struct mb_entry e;
		unsigned depth;
		char *path;
		if (!parse_entry(line, &e, &depth, &path))
			goto out;
		if (depth == 0) {
			/* the directory's own attributes: the root's come
			 * in no parent's listing */
			size_t i = dir_index(rdirs, nd, path);
			if (i == nd || e.type != MB_FT_DIR)
				goto out;
			own[i] = e;
			continue;
		}
		char *slash = strrchr(path, '/');
		*slash = '\0';
		size_t i = dir_index(rdirs, nd, slash == path ? "/" : path);
		char *target = e.type == MB_FT_SYMLINK ? mb_next_line(&text)
						       : NULL;
		if (i == nd || (e.type == MB_FT_SYMLINK && !target))
			goto out;   /* not asked about: not understood */
		/* the answer is JSON text: a byte that is not UTF-8 came as
		 * U+FFFD, a name that is not the sandbox's. Its directory
		 * goes the list route's way (which drops just that name) */
		if (strstr(slash + 1, REPLACEMENT) ||
		    (target && strstr(target, REPLACEMENT))) {
			odd[i] = true;
			continue;
		}
		if (lists[i].n >= max_kids * 2) {
			odd[i] = true;   /* grew since it was listed: not now */
			if (big)
				*big = true;
			continue;
		}
		if (lists[i].n == cap[i]) {
			size_t nc = cap[i] ? cap[i] * 2 : 16;
			struct mb_entry *v = realloc(lists[i].v, nc * sizeof(*v));
			if (!v)
				goto out;
			lists[i].v = v;
			cap[i] = nc;
		}
		e.name = strdup(slash + 1);
		e.link_target = target ? strdup(target) : NULL;
		lists[i].v[lists[i].n++] = e;
		if (!e.name || (target && !e.link_target))
			goto out;
	}
	for (size_t i = 0; whole && i < nd; i++) {
		if (odd[i])
			continue;
		/* compared with the one held: names that changed are dropped
		 * from the kernel (cache.c); taken */
		mbfs_cache_put_listing(fs, dirs[i], &lists[i], ctr, follow);
		if (own[i].type == MB_FT_DIR)
			mbfs_cache_put_seen(fs, dirs[i], &own[i], ctr);
		lists[i].v = NULL;
		lists[i].n = 0;
		put++;
	}
out:
	if (lists && !whole)
		mb_log(MB_LOG_DEBUG, "the listings from the sandbox were not "
		       "whole or not understood");
	for (size_t i = 0; lists && i < nd; i++)
		mb_entry_list_release(&lists[i]);
	free(own);
	free(odd);
	free(cap);
	free(lists);
	return put;
}

void mbfs_relist_note(struct mbfs *fs)
{
	struct mbfs_relist *r = fs->relist;
	char (*dirs)[MB_PATH_MAX] = r ? calloc(MBFS_RELIST_ALL, sizeof(*dirs))
				      : NULL;
	if (!dirs)
		return;
	size_t n = mbfs_cache_held_dirs(fs->cache, dirs, MBFS_RELIST_DIRS,
					MBFS_RELIST_ALL,
					MBFS_RELIST_KIDS, MBFS_RELIST_GRACE_MS);
	pthread_mutex_lock(&r->lock);
	/* what an earlier command left noted and nobody looked up since is
	 * replaced: the latest listings are what a user goes back to */
	memcpy(r->dirs, dirs, n * sizeof(*dirs));
	r->nd = n;
	pthread_mutex_unlock(&r->lock);
	free(dirs);
}

/* List the n directories of run (the noted ones, read only: others look
 * at them under the lock; or one cold one) in one exec, each taken when it
 * has fewer than max_kids * 2 entries. How many were put in the cache. */
static size_t relist(struct mbfs *fs, char (*run)[MB_PATH_MAX], size_t n,
		     size_t max_kids, bool *big)
{
	size_t put = 0;
	char (*dirs)[MB_PATH_MAX] = calloc(n, sizeof(*dirs));
	char (*rdirs)[MB_PATH_MAX] = calloc(n, sizeof(*rdirs));
	const char **argv = calloc(n + 1, sizeof(*argv));
	struct mb_buf b;
	size_t argc = 0, nd = 0;
	mb_buf_init(&b, MBFS_CMD_MAX);
	if (!dirs || !rdirs || !argv)
		goto out;
	argv[argc++] = "-d";
	for (size_t i = 0; i < n; i++) {
		/* one line a path: a name with a newline lists alone */
		if (strchr(run[i], '\n') ||
		    mbfs_remote_path(fs, run[i], rdirs[nd]))
			continue;
		memcpy(dirs[nd], run[i], MB_PATH_MAX);
		argv[argc++] = rdirs[nd++];
	}
	/* read before the guest is asked: a change of ours meanwhile makes
	 * a listing from before it stale (mbfs_cache_put_listing) */
	uint64_t ctr = mbfs_cache_counter(fs->cache);
	mbfs_reply res;
	struct mb_err err;
	mb_err_clear(&err);
	if (!nd || mbfs_sh_cmd(&b, mbfs_sh_follow, argv, argc))
		goto out;
	/* MBFS_RELIST_WAIT_MS, and half of what is left of the operation,
	 * at most: when the guest's exec does not answer (its slots taken,
	 * a stalled command) the list route answers the lookup that asked,
	 * as it did before listings went through the guest */
	uint64_t now_ms = mb_now_ms(), end = mb_op_current();
	uint64_t left = end > now_ms ? end - now_ms : fs->op_ms;
	uint64_t wait = left / 2 < MBFS_RELIST_WAIT_MS ? left / 2
						    : MBFS_RELIST_WAIT_MS;
	uint64_t prev = mb_op_narrow(now_ms + wait);
	int xrc = mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err);
	mb_op_deadline(prev);
	if (xrc) {
		mb_log(MB_LOG_DEBUG, "cannot list '%s'%s through the guest: %s",
		       run[0], n > 1 ? " and others" : "", err.msg);
		goto out;
	}
	/* a cut answer would drop the names past the cut */
	if (mbfs_exec_ok(&res) && res.out && !res.output_truncated)
		put = mbfs_relist_take(fs, res.out, dirs, rdirs, nd, ctr,
				       max_kids, false, big);
	else if (mbfs_exec_ok(&res) && res.output_truncated)
		*big = true;
	mbfs_reply_release(&res);
out:
	mb_buf_release(&b);
	free(argv);
	free(rdirs);
	free(dirs);
	return put;
}

static bool among(char (*v)[MB_PATH_MAX], size_t n, const char *dir)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], dir) == 0)
			return true;
	return false;
}

bool mbfs_relist_listing(struct mbfs *fs, const char *dir)
{
	struct mbfs_relist *r = fs->relist;
	if (!r)
		return false;
	pthread_mutex_lock(&r->lock);
	if (r->nrun && among(r->run, r->nrun, dir)) {
		/* being listed: its answer is the one to take */
		while (r->nrun)
			pthread_cond_wait(&r->done, &r->lock);
		pthread_mutex_unlock(&r->lock);
		return true;
	}
	/* one run at a time: a command's end meanwhile noted again */
	while (r->nrun && among(r->dirs, r->nd, dir))
		pthread_cond_wait(&r->done, &r->lock);
	if (!among(r->dirs, r->nd, dir)) {
		pthread_mutex_unlock(&r->lock);
		return false;
	}
	size_t n = r->nd;
	memcpy(r->run, r->dirs, n * sizeof(*r->run));
	r->nrun = n;
	r->nd = 0;
	pthread_mutex_unlock(&r->lock);

	/* r->run is this thread's until nrun drops to 0 */
	if (!mbfs_check_alive(fs)) {
		bool big = false;
		size_t put = relist(fs, r->run, n, MBFS_RELIST_KIDS, &big);
		for (size_t i = 0; put && i < n; i++)
			mbfs_prefetch_relisted(fs, r->run[i]);
		mb_log(MB_LOG_DEBUG, "listed %zu of %zu directories again in one "
		       "exec after a command", put, n);
	}

	pthread_mutex_lock(&r->lock);
	r->nrun = 0;
	pthread_cond_broadcast(&r->done);
	pthread_mutex_unlock(&r->lock);
	return true;
}

bool mbfs_relist_cold(struct mbfs *fs, const char *dir)
{
	struct mbfs_relist *r = fs->relist;
	char one[1][MB_PATH_MAX];
	if (!r || strlen(dir) >= MB_PATH_MAX || mbfs_check_alive(fs))
		return false;
	uint64_t hash = mbfs_fnv1a(MBFS_FNV_OFFSET, dir) | 1, now = mb_now_ms();
	bool known = false;
	size_t slot = COLD_RUNS;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < BIG_DIRS && !known; i++)
		known = r->big[i].at && r->big[i].hash == hash &&
			now - r->big[i].at < MBFS_RELIST_GRACE_MS;
	for (size_t i = 0; i < COLD_RUNS && !known; i++) {
		if (r->cold[i] == hash) {
			/* being listed: its answer (or its failure) is ours */
			while (r->cold[i] == hash)
				pthread_cond_wait(&r->done, &r->lock);
			pthread_mutex_unlock(&r->lock);
			return mbfs_cache_listed(fs->cache, dir);
		}
		if (!r->cold[i] && slot == COLD_RUNS)
			slot = i;
	}
	if (slot < COLD_RUNS && !known)
		r->cold[slot] = hash;   /* all taken: not shared, still right */
	pthread_mutex_unlock(&r->lock);
	if (known)
		return false;
	memcpy(one[0], dir, strlen(dir) + 1);
	bool big = false;
	bool put = relist(fs, one, 1, MBFS_COLD_KIDS / 2, &big) == 1;
	pthread_mutex_lock(&r->lock);
	if (big) {
		r->big[r->big_next % BIG_DIRS].hash = hash;
		r->big[r->big_next++ % BIG_DIRS].at = now;
	}
	if (slot < COLD_RUNS) {
		r->cold[slot] = 0;
		pthread_cond_broadcast(&r->done);
	}
	pthread_mutex_unlock(&r->lock);
	return put;
}
