/* ns.c: namespace changes (see ns.h): queued for the next write-back
 * batch where they can be (mkdir, unlink, rmdir of an empty directory,
 * rename of a file no one holds open),
 * else one checked command each (remote.h:
 * fuse/guest/ns.sh refuses a path that a symlink on the sandbox leads out
 * of the mounted directory; the metadata routes would follow it).
 *
 * After a confirmed change the caches are updated in place with what we
 * now know (cache.h), so listings stay usable for negative lookups; after
 * a failed or unconfirmed one they are invalidated as before. Times queued
 * for the paths involved, or for the directories whose mtime the change
 * moves, are sent first (batch.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fuse/outbox/batch.h"
#include "fuse/cache/cache.h"
#include "fuse/durable/data.h"
#include "fuse/cache/inode.h"
#include "fuse/mbfs.h"
#include "fuse/outbox/newdir.h"
#include "fuse/outbox/settle.h"
#include "fuse/node/node.h"
#include "fuse/ns/ns.h"
#include "fuse/transport/remote.h"
#include "fuse/view/view.h"
#include "fuse/outbox/wbq.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* The attributes of a directory we have just made, as the guest will
 * show them near enough. */
static void new_dir_stat(struct mbfs *fs, mode_t mode, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFDIR | (mode & 07777);
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = 4096;
	st->st_blksize = 65536;
	st->st_blocks = 8;
	clock_gettime(CLOCK_REALTIME, &st->st_mtim);
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* mkdir(2) through the write-back queue: the parent must be a directory
 * the mount knows and path a name it knows is free (the kernel has just
 * looked it up), so the guest's mkdir can only fail by a race with
 * another client. true when queued. */
static bool queue_mkdir(struct mbfs *fs, const char *path, mode_t mode)
{
	char parent[MB_PATH_MAX];
	struct stat st;
	if (fs->sync_close)
		return false;
	mbfs_parent_path(path, parent);
	if (mbfs_view_lookup(fs, parent, &st) || !S_ISDIR(st.st_mode))
		return false;
	/* a setgid parent passes it on (Linux, on the guest too) */
	mode_t sgid = st.st_mode & S_ISGID;
	if (mbfs_view_lookup(fs, path, &st) != -ENOENT)
		return false;
	new_dir_stat(fs, mode | sgid, &st);
	/* the parent's queued times land before the mkdir moves its mtime */
	mbfs_outbox_settle(fs, path, MBFS_SETTLE_TIMES_PARENT);
	if (!mbfs_wbq_mkdir(fs, path, &st))
		return false;
	mbfs_wbq_parent_changes(fs, path, true);
	mbfs_cache_dir_changed(fs->cache, path);
	return true;
}

int mbfs_ns_mkdir(struct mbfs *fs, const char *path, mode_t mode)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	if (queue_mkdir(fs, path, mode))
		return 0;
	rc = mbfs_outbox_settle(fs, path, MBFS_SETTLE_NEW_NAME);
	if (rc)
		return rc;
	bool sure;
	rc = mbfs_remote_mkdir(fs, path, mode & 07777, &sure);
	if (rc || !sure) {
		/* found after an unconfirmed answer: maybe not ours, not empty */
		mbfs_cache_invalidate(fs->cache, path);
		if (!rc)
			mbfs_cache_dir_changed(fs->cache, path);
		return rc;
	}
	/* ours and new: empty, so its names need no lookup on the guest */
	struct stat st;
	new_dir_stat(fs, mode, &st);
	st.st_mtim.tv_nsec = st.st_atim.tv_nsec = st.st_ctim.tv_nsec = 0;
	mbfs_cache_put_dir(fs->cache, path, &st);
	return 0;
}

/* The names a listing holds that the view shows: one whose removal is
 * queued is not there any more (a listing taken from the sandbox since,
 * a bulk walk's, still has it). */
struct count {
	struct mbfs *fs;
	const char *dir;
	size_t n;
};

static int count_one(void *ud, const char *name, const struct stat *st)
{
	struct count *c = ud;
	char p[MB_PATH_MAX];
	(void)st;
	if (snprintf(p, sizeof(p), "%s/%s", strcmp(c->dir, "/") ? c->dir : "",
		     name) >= (int)sizeof(p) || !mbfs_view_gone(c->fs, p))
		c->n++;
	return 0;
}

/* Can the removal of path travel in the write-back queue (wbq.h)? A file
 * the mount knows is there, or a directory it knows is empty: one made
 * here and not sent, or one whose whole listing it holds with nothing
 * left in it (an rm -rf has just listed and emptied it). Then the guest
 * can only refuse it by a race with another client, which is reported. */
static bool can_queue_remove(struct mbfs *fs, const char *path, bool dir)
{
	struct stat st;
	if (fs->sync_close || !fs->wbq ||
	    mbfs_view_getattr(fs, path, &st) || S_ISDIR(st.st_mode) != dir)
		return false;
	if (!dir)
		return true;
	if (mbfs_newdir_stat(fs->newdirs, path, &st) == 1)
		return true;
	struct count c = { fs, path, 0 };
	return mbfs_cache_listed(fs->cache, path) &&
	       mbfs_view_readdir(fs, path, count_one, &c) == 0 && c.n == 0;
}

/* What the mount shows once path is removed (on the guest, or queued). */
static void removed_here(struct mbfs *fs, const char *path, bool dir,
			 bool tree)
{
	if (dir)
		mbfs_data_drop_tree(fs->data, path);
	else
		mbfs_data_drop(fs->data, path);
	mbfs_cache_removed(fs->cache, path, tree);
	mbfs_node_unlinked(fs, path);
	mbfs_ino_removed(fs, path);
}

static int remove_path(struct mbfs *fs, const char *path, bool dir)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	int fresh = dir ? 0 : mbfs_node_unlink_new(fs, path);
	if (fresh == 1) {
		/* created here and never uploaded: nothing on the guest */
		mbfs_cache_removed(fs->cache, path, false);
		return 0;
	}
	if (dir) {
		/* files created here but not uploaded yet are in it too */
		struct mbfs_dirent *v;
		size_t n;
		rc = mbfs_node_list_new(fs, path, &v, &n);
		if (rc)
			return rc;
		mbfs_dirents_free(v, n);
		if (n)
			return -ENOTEMPTY;
	}
	/* in order with what is queued, in the next batch: an rm -rf costs
	 * a batch, not a request per name; a queued copy of the file never
	 * travels (the node is unlinked) */
	if (fresh == 2 || can_queue_remove(fs, path, dir)) {
		/* times queued for it or its directory land before */
		mbfs_outbox_settle(fs, path, MBFS_SETTLE_TIMES |
				   MBFS_SETTLE_TIMES_BELOW |
				   MBFS_SETTLE_TIMES_PARENT);
		if (mbfs_wbq_remove(fs, path, dir, NULL)) {
			mbfs_wbq_parent_changes(fs, path, false);
			removed_here(fs, path, dir, dir);
			return 0;
		}
	}
	/* a queued copy of it (or below it) would land after the remove */
	rc = mbfs_outbox_settle(fs, path, MBFS_SETTLE_GONE);
	if (rc)
		return rc;
	bool sure;
	rc = mbfs_remote_remove(fs, path, dir, &sure);
	if (fresh && rc == -ENOENT)
		rc = 0;   /* what it replaced never got there: gone all the same */
	if (!rc) {
		removed_here(fs, path, dir, dir || !sure);
	} else {
		if (dir)
			mbfs_data_drop_tree(fs->data, path);
		else
			mbfs_data_drop(fs->data, path);
		if (dir)
			mbfs_cache_invalidate_tree(fs->cache, path);
		else
			mbfs_cache_invalidate(fs->cache, path);
	}
	return rc;
}

int mbfs_ns_unlink(struct mbfs *fs, const char *path)
{
	return remove_path(fs, path, false);
}

int mbfs_ns_rmdir(struct mbfs *fs, const char *path)
{
	return remove_path(fs, path, true);
}

/* The rename of from over to through the write-back queue (wbq.h): a
 * regular file the mount knows, over a free name or such a file (it sees
 * no link counts: two names of one file are left to apply.sh's "w"), no
 * node at either name (an open file's bytes may still be
 * fetched by its name): then the guest can only refuse it by a race with
 * another client, which is reported. A rename storm costs a batch, not a
 * command per file. true when queued. */
static bool queue_move(struct mbfs *fs, const char *from, const char *to,
		       unsigned flags)
{
	struct stat fst, tst;
	if (fs->sync_close || !fs->wbq || flags ||
	    mbfs_view_getattr(fs, from, &fst) || !S_ISREG(fst.st_mode))
		return false;
	int rc = mbfs_view_getattr(fs, to, &tst);
	if (rc ? rc != -ENOENT : !S_ISREG(tst.st_mode))
		return false;
	if (mbfs_node_at(fs, from) || mbfs_node_at(fs, to))
		return false;
	/* times queued for either name or their directories land first:
	 * the move carries or replaces the one, and moves the others */
	mbfs_outbox_settle(fs, from, MBFS_SETTLE_TIMES | MBFS_SETTLE_TIMES_PARENT);
	mbfs_outbox_settle(fs, to, MBFS_SETTLE_TIMES | MBFS_SETTLE_TIMES_PARENT);
	if (!mbfs_wbq_move(fs, from, to, &fst))
		return false;
	mbfs_wbq_parent_changes(fs, from, false);
	mbfs_wbq_parent_changes(fs, to, false);
	mbfs_cache_renamed(fs->cache, from, to);
	mbfs_data_drop(fs->data, from);
	mbfs_data_drop(fs->data, to);
	mbfs_ino_renamed(fs, from, to);
	return true;
}

/* After a rename attempt: caches follow a confirmed one, forget the paths
 * of any other outcome. */
static void renamed(struct mbfs *fs, const char *from, const char *to,
		    int rc, bool sure)
{
	if (!rc && sure) {
		mbfs_cache_renamed(fs->cache, from, to);
	} else {
		mbfs_cache_invalidate_tree(fs->cache, from);
		mbfs_cache_invalidate_tree(fs->cache, to);
		if (!rc) {   /* done (mv -fT): both directories changed */
			mbfs_cache_dir_changed(fs->cache, from);
			mbfs_cache_dir_changed(fs->cache, to);
		}
	}
	mbfs_data_drop_tree(fs->data, from);
	mbfs_data_drop_tree(fs->data, to);
	if (!rc) {
		mbfs_node_renamed(fs, from, to);
		mbfs_ino_renamed(fs, from, to);
	}
	mbfs_batch_move_end(fs, from, to, rc == 0);
}

int mbfs_ns_rename(struct mbfs *fs, const char *from, const char *to,
		   unsigned flags)
{
	if (strcmp(from, to) == 0)
		return 0;
	char rfrom[MB_PATH_MAX], rto[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, from, rfrom);
	if (!rc)
		rc = mbfs_remote_path(fs, to, rto);
	if (rc)
		return rc;
	/* in order with what is queued: no barrier */
	if (queue_move(fs, from, to, flags))
		return 0;
	/* created here and still queued: renamed here, sent once */
	int fresh = mbfs_node_rename_new(fs, from, to, flags, &rc);
	if (fresh == 2) {
		/* it had replaced the guest's file at from, which goes in
		 * the next batch, after any older copy of it (or now) */
		if (mbfs_wbq_remove(fs, from, false, NULL)) {
			mbfs_cache_removed(fs->cache, from, false);
			return 0;
		}
		mbfs_outbox_settle(fs, from, MBFS_SETTLE_FILE);
		bool sure;
		rc = mbfs_remote_remove(fs, from, false, &sure);
		if (rc == -ENOENT)
			rc = 0;
		if (rc) {   /* done here: the stale name is said, at the
			     * next sync too */
			char why[128];
			snprintf(why, sizeof(why), "a file renamed over it moved "
				 "on, and its old name could not be removed on "
				 "the sandbox: %s", strerror(-rc));
			mb_log(MB_LOG_WARN, "'%s': %s", from, why);
			mbfs_wbq_note_failed(fs, 1, from, why, false);
		}
		return 0;
	}
	if (fresh)
		return rc;
	/* an open copy's changes first (its flush settles from's mkdirs
	 * and moves); then queued copies below from, or of what to
	 * replaces; both directories' mtimes move; what replaces to ends
	 * its times; times queued for from follow it (move_begin/end).
	 * from's directory changes only once to's settle holds too: a
	 * rename that fails there leaves the time queued for it */
	rc = mbfs_node_sync_path(fs, from);
	if (!rc)
		rc = mbfs_outbox_settle(fs, from, MBFS_SETTLE_DIRS |
					MBFS_SETTLE_FILES_BELOW |
					MBFS_SETTLE_INFLIGHT |
					MBFS_SETTLE_TIMES_PARENT);
	if (!rc)
		rc = mbfs_outbox_settle(fs, to, MBFS_SETTLE_GONE);
	if (rc)
		return rc;
	mbfs_wbq_parent_changes(fs, from, false);
	mbfs_batch_move_begin(fs, from);
	bool sure;
	rc = mbfs_remote_rename(fs, from, to, flags & RENAME_NOREPLACE, &sure);
	if (rc == 1) {
		/* one file under both names: rename(2) leaves both; the
		 * mount looks both up again */
		mbfs_batch_move_end(fs, from, to, false);
		mbfs_cache_invalidate(fs->cache, from);
		mbfs_cache_invalidate(fs->cache, to);
		return 0;
	}
	renamed(fs, from, to, rc, sure);
	return rc;
}

int mbfs_ns_chmod(struct mbfs *fs, const char *path, mode_t mode)
{
	unsigned perm = mode & 07777;
	if (mbfs_node_chmod_new(fs, path, perm))
		return 0;   /* applied after the file's first upload */
	struct stat st;
	if (!fs->sync_close && mbfs_view_lookup(fs, path, &st) == 0 &&
	    S_ISDIR(st.st_mode) && mbfs_wbq_dir_mode(fs, path, perm)) {
		/* a directory's mode travels in the next batch */
		mbfs_cache_set_perm(fs->cache, path, perm);
		return 0;
	}
	/* a file's too, in order with the removals and moves, when no one
	 * holds it open (an open copy's upload carries a mode): a chmod -R
	 * costs a batch, not a command per file */
	if (!fs->sync_close && mbfs_view_getattr(fs, path, &st) == 0 &&
	    S_ISREG(st.st_mode) && !mbfs_node_at(fs, path) &&
	    /* its base is the sandbox's file: queued times land first */
	    mbfs_outbox_settle(fs, path, MBFS_SETTLE_TIMES |
			       MBFS_SETTLE_STRICT) == 0 &&
	    mbfs_view_lookup(fs, path, &st) == 0 && S_ISREG(st.st_mode) &&
	    mbfs_wbq_chmod(fs, path, perm, &st)) {
		mbfs_cache_set_perm(fs->cache, path, perm);
		return 0;
	}
	/* a queued copy carries the mode it had when queued */
	int rc = mbfs_outbox_settle(fs, path, MBFS_SETTLE_DIRS | MBFS_SETTLE_FILE);
	if (rc)
		return rc;
	rc = mbfs_remote_chmod(fs, path, perm);
	if (rc)
		mbfs_cache_invalidate(fs->cache, path);
	else
		mbfs_cache_set_perm(fs->cache, path, perm);
	return rc;
}

int mbfs_ns_truncate(struct mbfs *fs, const char *path, off_t size)
{
	int rc;
	if (mbfs_node_truncate_path(fs, path, size, &rc))
		return rc;
	rc = mbfs_outbox_settle(fs, path, MBFS_SETTLE_DIRS | MBFS_SETTLE_TIMES);
	if (rc)
		return rc;
	char rpath[MB_PATH_MAX];
	rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	mbfs_cache_invalidate(fs->cache, path);
	mbfs_data_drop(fs->data, path);
	rc = mbfs_remote_truncate(fs, path, (uint64_t)size);
	mbfs_cache_invalidate(fs->cache, path);
	return rc;
}

int mbfs_ns_symlink(struct mbfs *fs, const char *target, const char *path)
{
	int rc = mbfs_outbox_settle(fs, path, MBFS_SETTLE_NEW_NAME);
	if (rc)
		return rc;
	rc = mbfs_remote_symlink(fs, target, path);
	if (rc) {
		mbfs_cache_invalidate(fs->cache, path);
		return rc;
	}
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFLNK | 0777;
	st.st_nlink = 1;
	st.st_uid = fs->uid;
	st.st_gid = fs->gid;
	st.st_size = (off_t)strlen(target);
	st.st_blksize = 65536;
	st.st_mtim.tv_sec = time(NULL);
	st.st_atim = st.st_ctim = st.st_mtim;
	mbfs_cache_put(fs->cache, path, &st);
	return 0;
}

int mbfs_ns_link(struct mbfs *fs, const char *from, const char *to)
{
	int rc = 0;
	if (mbfs_node_link_new(fs, from, to, &rc))
		return rc;   /* both names still queued here */
	/* an open copy's changes first; from may be a file whose move here
	 * is queued; its times travel with it */
	rc = mbfs_node_sync_path(fs, from);
	if (!rc)
		rc = mbfs_outbox_settle(fs, from, MBFS_SETTLE_DIRS |
					MBFS_SETTLE_TIMES);
	if (!rc)
		rc = mbfs_outbox_settle(fs, to, MBFS_SETTLE_NEW_NAME);
	if (!rc)
		rc = mbfs_remote_link(fs, from, to);
	mbfs_cache_invalidate(fs->cache, to);
	mbfs_cache_invalidate(fs->cache, from);
	if (!rc)
		mbfs_cache_dir_changed(fs->cache, to);
	return rc;
}
