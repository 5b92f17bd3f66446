/* follow.c: open files and listed directories follow the sandbox while a
 * command runs (follow.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/bulk/relist.h"
#include "fuse/cache/cache.h"
#include "fuse/cache/kcache.h"
#include "fuse/face/agent.h"
#include "fuse/face/follow.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/view/view.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/transport/remote.h"

/* How often, while a command runs. tail -f reads once a second: a line
 * shows within about two. */
#define FOLLOW_MS 1000
/* Open copies asked about per round; one exec holds their paths. */
#define FOLLOW_MAX 64
/* Listings held asked about per round (the latest), and the largest
 * taken: an editor's or a file manager's directory, not a tree's. */
#define FOLLOW_DIRS 8
#define FOLLOW_DIR_KIDS 256

struct mbfs_follow {
	struct mbfs *fs;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;             /* protected by mu */
};

/* "SIZE MTIME" of line, or false ("-", or not understood). */
static bool parse_line(const char *line, uint64_t *size, time_t *mtime)
{
	unsigned long long s;
	long long m;
	char end;
	if (sscanf(line, "%llu %lld%c", &s, &m, &end) != 2)
		return false;
	*size = s;
	*mtime = (time_t)m;
	return true;
}

/* One round: ask about every open clean copy and the latest listings
 * held, let go of what moved on. */
static void round_once(struct mbfs *fs)
{
	struct mbfs_node_base *v = calloc(FOLLOW_MAX, sizeof(*v));
	const char **argv = calloc(FOLLOW_MAX + 1 + FOLLOW_DIRS, sizeof(*argv));
	char (*rpath)[MB_PATH_MAX] = calloc(FOLLOW_MAX + FOLLOW_DIRS, sizeof(*rpath));
	char (*dirs)[MB_PATH_MAX] = calloc(FOLLOW_DIRS, sizeof(*dirs));
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	bool mem = v && argv && rpath && dirs;
	size_t n = mem ? mbfs_node_open_clean(fs, v, FOLLOW_MAX) : 0;
	size_t k = 0, nd = 0;
	for (size_t i = 0; i < n; i++) {
		/* one line a path: a name with a newline is left to the
		 * invalidation after the command */
		if (strchr(v[i].path, '\n') || mbfs_remote_path(fs, v[i].path, rpath[k]))
			continue;
		v[k] = v[i];
		/* not fetched yet: what the mount last showed of it */
		struct stat st;
		if (!v[k].loaded && mbfs_view_getattr(fs, v[k].path, &st))
			continue;
		if (!v[k].loaded) {
			v[k].size = (uint64_t)st.st_size;
			v[k].mtime = st.st_mtim.tv_sec;
		}
		argv[k] = rpath[k];
		k++;
	}
	/* read before the guest is asked: a change of ours meanwhile makes
	 * a listing from before it stale (mbfs_cache_put_listing) */
	uint64_t ctr = mbfs_cache_counter(fs->cache);
	size_t held = mem ? mbfs_cache_held_dirs(fs->cache, dirs, FOLLOW_DIRS, FOLLOW_DIRS,
						 FOLLOW_DIR_KIDS, 0) : 0;
	size_t argc = k;
	if (held)
		argv[argc++] = "-d";
	for (size_t i = 0; i < held; i++) {
		char *r = rpath[k + nd];
		if (mbfs_remote_path(fs, dirs[i], r))
			continue;
		if (nd != i)
			memcpy(dirs[nd], dirs[i], MB_PATH_MAX);
		argv[argc++] = r;
		nd++;
	}
	if (held && !nd)
		argc--;
	mbfs_reply res;
	struct mb_err err;
	mb_err_clear(&err);
	if (!argc || mbfs_sh_cmd(&b, mbfs_sh_follow, argv, argc))
		goto out;
	if (mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err)) {
		/* the next round asks again; the command's end invalidates */
		mb_log(MB_LOG_DEBUG, "cannot ask about open files: %s", err.msg);
		goto out;
	}
	if (mbfs_exec_ok(&res) && res.out) {
		char *text = res.out;
		for (size_t i = 0; i < k; i++) {
			char *line = mb_next_line(&text);
			if (!line)
				break;
			uint64_t size;
			time_t mtime;
			if (!parse_line(line, &size, &mtime) ||
			    size != v[i].size || mtime != v[i].mtime) {
				mb_log(MB_LOG_DEBUG, "'%s' changed on the sandbox "
				       "while open: its readers follow",
				       v[i].path);
				mbfs_node_recheck(fs, v[i].path);
				mbfs_cache_invalidate(fs->cache, v[i].path);
				mbfs_kcache_stale(fs->kcache, v[i].path);
			}
		}
		/* a cut answer would drop the names past the cut */
		if (nd && !res.output_truncated)
			mbfs_relist_take(fs, text, dirs, &rpath[k], nd, ctr,
					 FOLLOW_DIR_KIDS, true, NULL);
	}
	mbfs_reply_release(&res);
out:
	mb_buf_release(&b);
	free(dirs);
	free(rpath);
	free(argv);
	free(v);
}

static void *follow_main(void *arg)
{
	struct mbfs_follow *f = arg;
	pthread_mutex_lock(&f->mu);
	while (!f->stop) {
		/* cv runs on the monotonic clock (mbfs_follow_start), as
		 * mb_now_ms: a clock step neither stalls nor hurries it */
		uint64_t at = mb_now_ms() + FOLLOW_MS;
		struct timespec until = {
			.tv_sec = (time_t)(at / 1000),
			.tv_nsec = (long)(at % 1000) * 1000000L,
		};
		pthread_cond_timedwait(&f->cv, &f->mu, &until);
		if (f->stop)
			break;
		pthread_mutex_unlock(&f->mu);
		if (mbfs_agent_active(f->fs->agent) && !mbfs_check_alive(f->fs))
			round_once(f->fs);
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

int mbfs_follow_start(struct mbfs *fs, struct mbfs_follow **out)
{
	struct mbfs_follow *f = calloc(1, sizeof(*f));
	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->fs = fs;
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc = pthread_create(&f->th, NULL, follow_main, f);
	if (rc) {
		pthread_mutex_destroy(&f->mu);
		pthread_cond_destroy(&f->cv);
		free(f);
		return -rc;
	}
	*out = f;
	return 0;
}

void mbfs_follow_stop(struct mbfs_follow *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->th, NULL);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}
