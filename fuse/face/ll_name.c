/* ll_name.c: the namespace requests of the FUSE session (ll.h): make,
 * remove, rename and link names, each under the tree locks of the names
 * it changes; a file removed or replaced while open is hidden instead.
 */
#include "fuse/mbfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "fuse/face/itab.h"
#include "fuse/face/ll_int.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* A file removed or replaced while open: renamed to a hidden name in its
 * directory instead (hidden.h), removed at its last close. */
static int hide(uint64_t dir, const char *name, const char *path)
{
	uint64_t ino = mbfs_itab_find(T, dir, name);
	char hname[64], hpath[MB_PATH_MAX];
	for (int tries = 0; tries < 10; tries++) {
		unsigned ctr = atomic_fetch_add(&L.hidectr, 1) + 1;
		snprintf(hname, sizeof(hname), ".fuse_hidden%08x%08x",
			 (unsigned)ino, ctr);
		if (mbfs_itab_find(T, dir, hname))
			continue;
		int rc = mbfs_itab_path(T, dir, hname, hpath);
		if (rc)
			return rc;
		struct stat st;
		rc = L.op->getattr(hpath, &st, NULL);
		if (rc == 0)
			continue;
		if (rc != -ENOENT)
			break;
		rc = L.op->rename(path, hpath, 0);
		if (!rc)
			mbfs_itab_rename(T, dir, name, dir, hname, true);
		return rc;
	}
	return -EBUSY;
}

void mbfs_ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc && S_ISREG(mode)) {
		struct fuse_file_info fi;
		memset(&fi, 0, sizeof(fi));
		fi.flags = O_CREAT | O_EXCL | O_WRONLY;
		rc = L.op->create(path, mode, &fi);
		if (!rc) {
			rc = mbfs_ll_lookup_path(parent, name, path, &e, &fi);
			L.op->release(NULL, &fi);
		}
	} else if (!rc) {
		rc = L.op->mknod(path, mode, rdev);
		if (!rc)
			rc = mbfs_ll_lookup_path(parent, name, path, &e, NULL);
	}
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_entry(req, &e, rc);
}

void mbfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc)
		rc = L.op->mkdir(path, mode);
	if (!rc)
		rc = mbfs_ll_lookup_path(parent, name, path, &e, NULL);
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_entry(req, &e, rc);
}

void mbfs_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	mbfs_ll_begin(req);
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { .wdir = { parent }, .wname = { name } };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc && mbfs_itab_is_open(T, parent, name)) {
		rc = hide(parent, name, path);
	} else if (!rc) {
		rc = L.op->unlink(path);
		if (!rc)
			mbfs_itab_remove(T, parent, name);
	}
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_err(req, rc);
}

void mbfs_ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	mbfs_ll_begin(req);
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { .wdir = { parent }, .wname = { name } };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc)
		rc = L.op->rmdir(path);
	if (!rc)
		mbfs_itab_remove(T, parent, name);
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_err(req, rc);
}

void mbfs_ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	char path[MB_PATH_MAX];
	struct mbfs_itab_locks l = { 0 };
	int rc = mbfs_ll_path(&l, parent, name, path);
	if (!rc)
		rc = L.op->symlink(link, path);
	if (!rc)
		rc = mbfs_ll_lookup_path(parent, name, path, &e, NULL);
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_entry(req, &e, rc);
}

void mbfs_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	mbfs_ll_begin(req);
	char from[MB_PATH_MAX], to[MB_PATH_MAX];
	struct mbfs_itab_locks l = {
		.read = { 0, newparent },
		.wdir = { parent, newparent }, .wname = { name, newname },
	};
	int rc = mbfs_ll_path(&l, parent, name, from);
	if (!rc)
		rc = mbfs_itab_path(T, newparent, newname, to);
	if (!rc)
		rc = L.o->rename_check(from, to, flags);
	if (!rc && !(flags & RENAME_EXCHANGE) &&
	    mbfs_itab_is_open(T, newparent, newname) &&
	    mbfs_itab_find(T, newparent, newname) != mbfs_itab_find(T, parent, name))
		rc = hide(newparent, newname, to);
	if (!rc)
		rc = L.op->rename(from, to, flags);
	if (!rc && (flags & RENAME_EXCHANGE))
		mbfs_itab_exchange(T, parent, name, newparent, newname);
	else if (!rc)
		mbfs_itab_rename(T, parent, name, newparent, newname, false);
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_err(req, rc);
}

void mbfs_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	mbfs_ll_begin(req);
	struct fuse_entry_param e;
	char from[MB_PATH_MAX], to[MB_PATH_MAX];
	struct mbfs_itab_locks l = { .read = { 0, newparent } };
	int rc = mbfs_ll_path(&l, ino, NULL, from);
	if (!rc)
		rc = mbfs_itab_path(T, newparent, newname, to);
	if (!rc)
		rc = L.op->link(from, to);
	if (!rc)
		rc = mbfs_ll_lookup_path(newparent, newname, to, &e, NULL);
	mbfs_itab_unlock(T, &l);
	mbfs_ll_reply_entry(req, &e, rc);
}
