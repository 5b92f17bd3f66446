/* attach.h: what mbfs checks and prepares on the container before it
 * mounts, with one GET /containers and a stat (two more requests when the
 * default /workspace has to be made).
 *
 * Pins the generation (or confirms a pinned one), records its hard
 * deadline (expiresAt) and the account's idle timeout, and checks that the
 * remote directory is a directory. The default node image has no
 * /workspace (contract §9.1): when the mounted root is MBFS_DEFAULT_ROOT and
 * it is missing, it is created (mkdir -p, mode 0755), as Mastra's
 * @mastra/mainbrella adapter does; any other missing root is an error that
 * names it. Does not mount and keeps nothing alive (lease.h).
 */
#ifndef MBFS_ATTACH_H
#define MBFS_ATTACH_H

#include <stdbool.h>

#include "common/api.h"
#include "common/err.h"

struct mbfs;

/* fs->ident.id and fs->root set; pinned when fs->ident.created_at is.
 * Fills fs->ident.created_at, fs->expires_at, fs->expires_sec and
 * *idle_timeout_ms (0 when the service did not say). 0, or -errno with a
 * one-line message for the user in err. */
int mbfs_attach(struct mbfs *fs, struct mb_client *c,
		long long *idle_timeout_ms, struct mb_err *err);

#endif
