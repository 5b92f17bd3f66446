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
#include "fuse/face/ll.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/view/view.h"
#include "fuse/transport/guest_sh.h"
#include "fuse/transport/name.h"
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

/* What a round asks about. */
enum ask {
	ASK_ROUND,    /* while a command runs: open files and listings */
	ASK_BEFORE,   /* before one: the open files whose identity is unknown */
	ASK_AFTER,    /* after one: those whose identity is known */
};

/* "SIZE MTIME ID" of line, or false ("-", or not understood). */
static bool parse_line(const char *line, uint64_t *size, time_t *mtime,
		       char id[MBFS_GUEST_ID_MAX])
{
	unsigned long long s, dev, ino;
	long long m;
	char birth[32], end;
	if (sscanf(line, "%llu %lld %llu:%llu:%31[0-9.]%c", &s, &m, &dev, &ino,
		   birth, &end) != 5)
		return false;
	*size = s;
	*mtime = (time_t)m;
	/* no birth time (0): an inode number alone may be reused at once
	 * (ext4), by another file: the identity is unknown */
	if (strspn(birth, "0.") == strlen(birth))
		id[0] = '\0';
	else
		snprintf(id, MBFS_GUEST_ID_MAX, "%llu:%llu:%s", dev, ino, birth);
	return true;
}

/* The mount's path of the guest's rpath under the mounted directory. */
static bool local_of(const struct mbfs *fs, const char *rpath, char *out)
{
	size_t rl = strlen(fs->root);
	if (strncmp(rpath, fs->root, rl) != 0 || rpath[rl] != '/' ||
	    strlen(rpath + rl) >= MB_PATH_MAX)
		return false;
	snprintf(out, MB_PATH_MAX, "%s", rpath + rl);
	return true;
}

/* Where the "> ID PATH" lines moves[0..nm) put the file id, in the
 * mount, or false. */
static bool moved_to(const struct mbfs *fs, char **moves, size_t nm,
		     const char *id, char *out)
{
	size_t il = strlen(id);
	for (size_t i = 0; i < nm; i++)
		if (strncmp(moves[i] + 2, id, il) == 0 && moves[i][2 + il] == ' ' &&
		    local_of(fs, moves[i] + 3 + il, out) &&
		    mbfs_name_check(out) == 0)
			return true;
	return false;
}

/* File i changed on the guest, or went: what the mount and the kernel
 * hold of it goes, and its fds read it again. */
static void drop_file(struct mbfs *fs, const char *path)
{
	mbfs_node_recheck(fs, path);
	mbfs_cache_invalidate(fs->cache, path);
	mbfs_kcache_stale(fs->kcache, path);
}

/* The files a command moved (or removed) that copies held open here were
 * of: the copies follow, then the kernel's inodes and names. */
static void follow_moves(struct mbfs *fs, struct mbfs_node_move *m, size_t k)
{
	if (!k)
		return;
	size_t n = mbfs_node_followed(fs, m, k);
	const char **from = calloc(k, sizeof(*from));
	const char **to = calloc(k, sizeof(*to));
	if (n && from && to) {
		for (size_t i = 0; i < k; i++) {
			from[i] = m[i].from;
			to[i] = m[i].to;
		}
		mbfs_ll_moved(from, to, k);
	}
	for (size_t i = 0; i < k; i++) {
		mb_log(MB_LOG_DEBUG, "'%s' %s%s on the sandbox while open: its "
		       "fds follow the file", m[i].from,
		       m[i].to ? "moved to " : "went", m[i].to ? m[i].to : "");
		drop_file(fs, m[i].from);
		mbfs_kcache_drop_name(fs->kcache, m[i].from);
		if (m[i].to) {
			/* the kernel holds the file there now: later changes
			 * of that path are to reach its inode */
			mbfs_kcache_seen(fs->kcache, m[i].to, S_IFREG);
			drop_file(fs, m[i].to);
			mbfs_kcache_drop_name(fs->kcache, m[i].to);
		}
	}
	free(from);
	free(to);
}

/* The answer for the open files v[0..k): their changes, identities and
 * moves. text is left past them. */
static void take_files(struct mbfs *fs, enum ask how, char **text,
		       const struct mbfs_node_base *v, size_t k)
{
	char **lines = calloc(k ? k : 1, sizeof(*lines));
	size_t got = 0;
	while (lines && got < k && (lines[got] = mb_next_line(text)))
		got++;
	/* the moves, up to "=" (a file found twice: its links) */
	char **moves = calloc(2 * k + 1, sizeof(*moves)), *line;
	size_t nm = 0;
	while ((line = mb_next_line(text)) && strcmp(line, "=") != 0)
		if (moves && nm < 2 * k + 1 && strncmp(line, "> ", 2) == 0)
			moves[nm++] = line;
	struct mbfs_node_move *mv = calloc(k ? k : 1, sizeof(*mv));
	char (*to)[MB_PATH_MAX] = calloc(k ? k : 1, sizeof(*to));
	size_t nmv = 0;
	if (!line || !moves || !mv || !to)
		got = 0;   /* cut short: the invalidation after does it */
	for (size_t i = 0; i < got; i++) {
		uint64_t size;
		time_t mtime;
		char id[MBFS_GUEST_ID_MAX] = "";
		bool here = parse_line(lines[i], &size, &mtime, id);
		if (v[i].id[0] && strcmp(v[i].id, id) != 0) {
			/* not the file it was: renamed (its fds follow it),
			 * or replaced or removed (they keep what they read) */
			bool went = moved_to(fs, moves, nm, v[i].id, to[nmv]) &&
				    strcmp(to[nmv], v[i].path) != 0;
			bool dup = false;
			for (size_t j = 0; j < nmv && !dup; j++)
				dup = strcmp(mv[j].from, v[i].path) == 0 &&
				      strcmp(mv[j].id, v[i].id) == 0;
			if (!dup) {
				mv[nmv].from = v[i].path;
				mv[nmv].id = v[i].id;
				mv[nmv].to = went ? to[nmv] : NULL;
				nmv++;
			}
			continue;
		}
		if (here && strcmp(v[i].id, id) != 0)
			mbfs_node_set_id(fs, v[i].path, id);
		if (how != ASK_BEFORE &&
		    (!here || size != v[i].size || mtime != v[i].mtime)) {
			mb_log(MB_LOG_DEBUG, "'%s' changed on the sandbox "
			       "while open: its readers follow", v[i].path);
			drop_file(fs, v[i].path);
		}
	}
	follow_moves(fs, mv, nmv);
	free(to);
	free(mv);
	free(moves);
	free(lines);
}

/* One round: ask about the open clean copies (how says which) and, while
 * a command runs, the latest listings held; let go of what moved on. */
static void ask(struct mbfs *fs, enum ask how)
{
	struct mbfs_node_base *v = calloc(FOLLOW_MAX, sizeof(*v));
	const char **argv = calloc(2 * FOLLOW_MAX + 2 + FOLLOW_DIRS, sizeof(*argv));
	char (*rpath)[MB_PATH_MAX] = calloc(FOLLOW_MAX + FOLLOW_DIRS + 1, sizeof(*rpath));
	char (*dirs)[MB_PATH_MAX] = calloc(FOLLOW_DIRS, sizeof(*dirs));
	struct mb_buf b;
	mb_buf_init(&b, MBFS_CMD_MAX);
	bool mem = v && argv && rpath && dirs;
	size_t n = mem ? mbfs_node_open_clean(fs, v, FOLLOW_MAX) : 0;
	size_t k = 0, nd = 0, argc = 1;
	char *root = mem ? rpath[FOLLOW_MAX + FOLLOW_DIRS] : NULL;
	if (n && mbfs_remote_path(fs, "/", root))
		n = 0;
	for (size_t i = 0; i < n; i++) {
		/* one line a path: a name with a newline is left to the
		 * invalidation after the command */
		if ((how != ASK_ROUND && !v[i].held) ||
		    (how == ASK_BEFORE && v[i].id[0]) ||
		    (how == ASK_AFTER && !v[i].id[0]) ||
		    strchr(v[i].path, '\n') || mbfs_remote_path(fs, v[i].path, rpath[k]))
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
		argv[argc++] = rpath[k];
		argv[argc++] = v[k].id[0] ? v[k].id : "-";
		k++;
	}
	if (k)
		argv[0] = root;
	/* read before the guest is asked: a change of ours meanwhile makes
	 * a listing from before it stale (mbfs_cache_put_listing) */
	uint64_t ctr = mbfs_cache_counter(fs->cache);
	size_t held = mem && how == ASK_ROUND ?
		mbfs_cache_held_dirs(fs->cache, dirs, FOLLOW_DIRS, FOLLOW_DIRS,
				     FOLLOW_DIR_KIDS, 0) : 0;
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
	/* argv[0] is the root when there are files */
	const char **args = k ? argv : argv + 1;
	size_t nargs = k ? argc : argc - 1;
	mbfs_reply res;
	struct mb_err err;
	mb_err_clear(&err);
	if (!nargs || mbfs_sh_cmd(&b, mbfs_sh_follow, args, nargs))
		goto out;
	if (mbfs_exec(fs, b.data, MBFS_EXEC_TIMEOUT_MS, &res, &err)) {
		/* the next round asks again; the command's end invalidates */
		mb_log(MB_LOG_DEBUG, "cannot ask about open files: %s", err.msg);
		goto out;
	}
	if (mbfs_exec_ok(&res) && res.out) {
		char *text = res.out;
		if (k)
			take_files(fs, how, &text, v, k);
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

void mbfs_follow_before(struct mbfs *fs)
{
	ask(fs, ASK_BEFORE);
}

void mbfs_follow_after(struct mbfs *fs)
{
	ask(fs, ASK_AFTER);
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
			ask(f->fs, ASK_ROUND);
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
