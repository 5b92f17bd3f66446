/* ns.c: namespace changes through the metadata routes (see ns.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/data.h"
#include "fuse/mbfs.h"
#include "fuse/node.h"
#include "fuse/ns.h"
#include "fuse/remote.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* 1 when rpath exists on the guest, 0 when not, -errno when unknown. */
static int exists(struct mbfs *fs, const char *rpath, struct mb_entry *out)
{
	struct mb_entry e;
	struct mb_err err;
	mb_err_clear(&err);
	int rc = mb_fs_stat(fs->client, &fs->ident, rpath, false, &e, &err);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (out)
		*out = e;
	else
		mb_entry_release(&e);
	return 1;
}

int mbfs_ns_mkdir(struct mbfs *fs, const char *path, mode_t mode)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	struct mb_err err;
	mb_err_clear(&err);
	rc = mb_fs_mkdir(fs->client, &fs->ident, rpath, false, mode & 0777, &err);
	if (rc && err.ambiguous) {
		struct mb_entry e;
		if (exists(fs, rpath, &e) == 1) {
			rc = e.type == MB_FT_DIR ? 0 : rc;
			mb_entry_release(&e);
		}
	}
	mbfs_cache_invalidate(fs->cache, path);
	if (!rc && (mode & 07000))
		rc = mbfs_remote_chmod_exec(fs, path, mode & 07777);
	return mbfs_fail(fs, rc, &err);
}

static int remove_path(struct mbfs *fs, const char *path, bool dir)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	struct mb_err err;
	mb_err_clear(&err);
	rc = mb_fs_remove(fs->client, &fs->ident, rpath, false, &err);
	if (rc && err.ambiguous && exists(fs, rpath, NULL) == 0)
		rc = 0;   /* a 404 after a remove means it happened */
	if (dir) {
		mbfs_cache_invalidate_tree(fs->cache, path);
		mbfs_data_drop_tree(fs->data, path);
	} else {
		mbfs_cache_invalidate(fs->cache, path);
		mbfs_data_drop(fs->data, path);
	}
	if (!rc)
		mbfs_node_unlinked(fs, path);
	return mbfs_fail(fs, rc, &err);
}

int mbfs_ns_unlink(struct mbfs *fs, const char *path)
{
	return remove_path(fs, path, false);
}

int mbfs_ns_rmdir(struct mbfs *fs, const char *path)
{
	return remove_path(fs, path, true);
}

static void renamed(struct mbfs *fs, const char *from, const char *to)
{
	mbfs_cache_invalidate_tree(fs->cache, from);
	mbfs_cache_invalidate_tree(fs->cache, to);
	mbfs_data_drop_tree(fs->data, from);
	mbfs_data_drop_tree(fs->data, to);
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
	if (!rc)
		rc = mbfs_node_sync_path(fs, from);
	if (rc)
		return rc;
	struct mb_err err;
	mb_err_clear(&err);
	rc = mb_fs_move(fs->client, &fs->ident, rfrom, rto, &err);
	if (rc && err.ambiguous && exists(fs, rfrom, NULL) == 0 &&
	    exists(fs, rto, NULL) == 1)
		rc = 0;
	if (rc == -EEXIST && !(flags & RENAME_NOREPLACE)) {
		/* the move route never overwrites; mv -fT replaces a file or
		 * an empty directory atomically (rename(2) on the guest) */
		rc = mbfs_remote_rename_over(fs, from, to);
		renamed(fs, from, to);
		if (!rc)
			mbfs_node_renamed(fs, from, to);
		return rc;
	}
	renamed(fs, from, to);
	if (!rc)
		mbfs_node_renamed(fs, from, to);
	return mbfs_fail(fs, rc, &err);
}

int mbfs_ns_chmod(struct mbfs *fs, const char *path, mode_t mode)
{
	char rpath[MB_PATH_MAX];
	int rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	struct mb_err err;
	mb_err_clear(&err);
	if (mode & 07000) {
		rc = mbfs_remote_chmod_exec(fs, path, mode & 07777);
	} else {
		rc = mb_fs_chmod(fs->client, &fs->ident, rpath, mode & 0777, &err);
		rc = mbfs_fail(fs, rc, &err);
	}
	mbfs_cache_invalidate(fs->cache, path);
	return rc;
}

int mbfs_ns_truncate(struct mbfs *fs, const char *path, off_t size)
{
	int rc;
	if (mbfs_node_truncate_path(fs, path, size, &rc))
		return rc;
	char rpath[MB_PATH_MAX];
	rc = mbfs_remote_path(fs, path, rpath);
	if (rc)
		return rc;
	mbfs_cache_invalidate(fs->cache, path);
	mbfs_data_drop(fs->data, path);
	if (size == 0) {
		/* an empty PUT: atomic and keeps the mode */
		struct mb_err err;
		mb_err_clear(&err);
		rc = mb_file_put(fs->client, &fs->ident, rpath, "", 0, &err);
		rc = mbfs_fail(fs, rc, &err);
	} else {
		rc = mbfs_remote_truncate(fs, path, (uint64_t)size);
	}
	mbfs_cache_invalidate(fs->cache, path);
	return rc;
}
