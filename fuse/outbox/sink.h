/* sink.h: the outbox's one window on the mount above it.
 *
 * The outbox sends what is queued and learns how it went; what the mount
 * remembers of the sandbox (the cache) and what a path shows (the view)
 * stand above it. So it includes neither: it tells results, and asks what
 * a path shows, through this table, which the view fills in (view/cachesink.c)
 * and main.c hands over (fs->sink). Like the node's owner ops
 * (mbfs_wbq_files): the outbox knows the shape of the calls, not who
 * answers them. Every call may take the cache's lock; none is made with
 * the queue's lock held.
 */
#ifndef MBFS_SINK_H
#define MBFS_SINK_H

#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

struct mbfs;

struct mbfs_out_sink {
	/* path is on the sandbox now, with st; dir: a directory made, its
	 * listing empty (the files of its batch follow) */
	void (*landed)(struct mbfs *fs, const char *path, const struct stat *st,
		       bool dir);
	/* what is known of path may be wrong (a refusal, a link's other
	 * name); tree: and of everything below it */
	void (*unsure)(struct mbfs *fs, const char *path, bool tree);
	/* path is gone from the sandbox (tree: a directory, with all below) */
	void (*removed)(struct mbfs *fs, const char *path, bool tree);
	/* path's permission bits, or its modification time, were set */
	void (*set_perm)(struct mbfs *fs, const char *path, unsigned perm);
	void (*set_mtime)(struct mbfs *fs, const char *path,
			  const struct timespec *mtime);
	/* what the mount shows of path: 0 and st, or -errno */
	int (*shows)(struct mbfs *fs, const char *path, struct stat *st);
};

#endif
