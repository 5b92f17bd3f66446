/* attach.c: the checks and preparation before mounting (see attach.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/session/attach.h"
#include "fuse/mbfs.h"

/* Pin or confirm the generation; note its deadlines. */
static int find_generation(struct mbfs *fs, struct mb_client *c,
			   long long *idle_timeout_ms, struct mb_err *err)
{
	struct mb_container ct;
	struct mb_err e;
	bool pinned = fs->ident.created_at[0] != '\0';
	mb_err_clear(&e);
	int rc = mb_container_find(c, fs->ident.id, &ct, &e);
	if (rc == -ENOENT)
		return mb_err_set(err, ENOENT, "container '%s' is not running: "
				  "start one (mbfs --create) or check the id",
				  fs->ident.id);
	if (rc)
		return mb_err_set(err, -rc, "cannot look up container '%s': %s",
				  fs->ident.id, e.msg);
	if (pinned && strcmp(ct.created_at, fs->ident.created_at) != 0)
		return mb_err_set(err, ESTALE, "generation %s of container '%s' "
				  "is no longer running (the slot now runs %s): "
				  "mount %s@%s instead", fs->ident.created_at,
				  fs->ident.id, ct.created_at, fs->ident.id,
				  ct.created_at);
	if (strcmp(ct.status, "running") != 0)
		return mb_err_set(err, EAGAIN, "container '%s' is still %s: try "
				  "again in a moment", fs->ident.id, ct.status);
	snprintf(fs->ident.created_at, sizeof(fs->ident.created_at), "%s",
		 ct.created_at);
	time_t t;
	int msec;
	if (ct.expires_at[0] && mb_parse_iso8601(ct.expires_at, &t, &msec) == 0) {
		snprintf(fs->expires_at, sizeof(fs->expires_at), "%s", ct.expires_at);
		fs->expires_sec = t;
	}
	*idle_timeout_ms = ct.idle_timeout_ms;
	return 0;
}

/* mkdir -p of the default root. Repeating it is harmless and a stat
 * follows, so an unconfirmed answer needs no reconciling here. */
static int make_root(struct mbfs *fs, struct mb_client *c, const char *root,
		     struct mb_err *err)
{
	struct mb_err e;
	mb_err_clear(&e);
	int rc = mb_fs_mkdir(c, &fs->ident, root, true, 0755, &e);
	if (rc && !e.ambiguous)
		return mb_err_set(err, -rc, "cannot create remote directory '%s' "
				  "of container '%s': %s", root, fs->ident.id,
				  e.msg);
	mb_log(MB_LOG_INFO, "created the remote directory '%s' on container "
	       "'%s' (its image has none)", root, fs->ident.id);
	return 0;
}

int mbfs_attach(struct mbfs *fs, struct mb_client *c,
		long long *idle_timeout_ms, struct mb_err *err)
{
	mb_err_clear(err);
	int rc = find_generation(fs, c, idle_timeout_ms, err);
	if (rc)
		return rc;

	struct mb_entry ent;
	struct mb_err e;
	const char *root = fs->root[0] ? fs->root : "/";
	mb_err_clear(&e);
	rc = mb_fs_stat(c, &fs->ident, root, true, &ent, &e);
	if (rc == -ENOENT && strcmp(root, MBFS_DEFAULT_ROOT) == 0) {
		if ((rc = make_root(fs, c, root, err)))
			return rc;
		mb_err_clear(&e);
		rc = mb_fs_stat(c, &fs->ident, root, true, &ent, &e);
	}
	if (rc == -ENOENT)
		return mb_err_set(err, ENOENT, "remote directory '%s' does not "
				  "exist on container '%s' (only %s is created "
				  "when missing)", root, fs->ident.id,
				  MBFS_DEFAULT_ROOT);
	if (rc)
		return mb_err_set(err, -rc, "cannot use remote directory '%s' of "
				  "container '%s': %s", root, fs->ident.id,
				  e.msg);
	bool dir = ent.type == MB_FT_DIR;
	mb_entry_release(&ent);
	if (!dir)
		return mb_err_set(err, ENOTDIR, "remote path '%s' of container "
				  "'%s' is not a directory", root, fs->ident.id);
	return 0;
}
