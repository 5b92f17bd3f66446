/* control.c: the control file (see control.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/log.h"
#include "fuse/outbox/batch.h"
#include "fuse/cache/cache.h"
#include "fuse/face/control.h"
#include "fuse/face/follow.h"
#include "fuse/durable/data.h"
#include "fuse/ns/hidden.h"
#include "fuse/durable/journal.h"
#include "fuse/cache/kcache.h"
#include "fuse/mbfs.h"
#include "fuse/node/node.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/bulk/relist.h"
#include "fuse/outbox/unsent.h"
#include "fuse/face/warm.h"
#include "fuse/outbox/wbq.h"
#include "fuse/outbox/wbq_pending.h"

int mbfs_control_init(struct mbfs *fs)
{
	struct mb_control c;
	memset(&c, 0, sizeof(c));
	snprintf(c.api_url, sizeof(c.api_url), "%s", fs->api_url);
	c.ident = fs->ident;
	snprintf(c.root, sizeof(c.root), "%s", fs->root[0] ? fs->root : "/");
	snprintf(c.mountpoint, sizeof(c.mountpoint), "%s", fs->mountpoint);
	c.pid = (long)getpid();
	snprintf(c.version, sizeof(c.version), "%s", MB_VERSION);
	snprintf(c.expires_at, sizeof(c.expires_at), "%s", fs->expires_at);
	snprintf(c.agent, sizeof(c.agent), "%s", fs->agent_name);
	char *json = mb_control_format(&c);
	if (!json)
		return -ENOMEM;
	free(fs->control_json);
	fs->control_json = json;
	fs->control_len = strlen(json);
	return 0;
}

bool mbfs_is_control(const char *path)
{
	return path && path[0] == '/' && strcmp(path + 1, MB_CONTROL_NAME) == 0;
}

/* What is known only once mounted, or changes: where the log goes
 * ("logFile", when a file), whether the generation is gone ("stopped"),
 * where kept data goes ("keptDir", in "cacheDir") and op_timeout
 * ("opTimeoutMs"). malloc'd ",..." text (maybe
 * ""), or NULL without memory. */
static char *state_json(const struct mbfs *fs)
{
	cJSON *o = cJSON_CreateObject();
	const char *log = mb_log_file();
	const char *kdir = fs->journal ? mbfs_journal_kept_dir(fs->journal) : NULL;
	char *t = NULL, *res = NULL;
	uint64_t entered, left, syncs;
	mbfs_journal_commits(fs->journal, &entered, &left, &syncs);
	cJSON *jn = cJSON_CreateObject();
	if (jn && !cJSON_AddItemToObject(o, "journal", jn)) {
		cJSON_Delete(jn);
		jn = NULL;
	}
	if (!o || !jn ||
	    /* closes (and batches) that waited for the disk, those whose
	     * wait is over, and the syncs of the journal they shared */
	    !cJSON_AddNumberToObject(jn, "commits", (double)entered) ||
	    !cJSON_AddNumberToObject(jn, "durable", (double)left) ||
	    !cJSON_AddNumberToObject(jn, "syncs", (double)syncs) ||
	    (log && !cJSON_AddStringToObject(o, "logFile", log)) ||
	    !cJSON_AddBoolToObject(o, "stopped", atomic_load(&fs->stopped)) ||
	    (kdir && !cJSON_AddStringToObject(o, "keptDir", kdir)) ||
	    (fs->cache_dir[0] &&
	     !cJSON_AddStringToObject(o, "cacheDir", fs->cache_dir)) ||
	    /* how long `mbfs -u` waits while the sandbox does not answer */
	    !cJSON_AddNumberToObject(o, "opTimeoutMs", (double)fs->op_ms))
		goto out;
	t = cJSON_PrintUnformatted(o);
	/* {"a":1} -> ,"a":1 */
	if (t && asprintf(&res, "%s%.*s", t[1] != '}' ? "," : "",
			  (int)strlen(t) - 2, t + 1) < 0)
		res = NULL;
out:
	free(t);
	cJSON_Delete(o);
	return res;
}

/* The control file's text now: the identity built at init, plus
 * state_json, the requests this mount answered by kind ("ops", warm.h),
 * write-back's state with the first paths it holds ("pendingPaths"),
 * what this mount kept ("kept": [{"path","file","reason"}], journal.h)
 * once there is any, and what an ended mount did not send ("unsent",
 * unsent.h) when it left a record. malloc'd
 * (*len bytes), or NULL without memory. */
static char *control_text(const struct mbfs *fs, size_t *len)
{
	char *kept = fs->journal ? mbfs_journal_kept_json(fs->journal) : NULL;
	char *wb = mbfs_wbq_json((struct mbfs *)fs);
	char *pend = mbfs_wbq_pending_json((struct mbfs *)fs, MBFS_UNSENT_PATHS);
	char *uns = mbfs_unsent_json((struct mbfs *)fs);
	char *ops = mbfs_warm_json(fs->warm);
	char *st = state_json(fs);
	char *t = NULL;
	size_t base = fs->control_len;
	if (!st || base < 2) {
		t = malloc(base + 1);
		if (t)
			memcpy(t, fs->control_json ? fs->control_json : "", base + 1);
		*len = base;
	} else if (asprintf(&t, "%.*s%s%s%s%s%s%s%s%s%s%s%s}\n", (int)(base - 2),
			    fs->control_json, st, ops ? ",\"ops\":" : "",
			    ops ? ops : "", wb ? ",\"writeback\":" : "",
			    wb ? wb : "", pend ? ",\"pendingPaths\":" : "",
			    pend ? pend : "", kept ? ",\"kept\":" : "",
			    kept ? kept : "", uns ? ",\"unsent\":" : "",
			    uns ? uns : "") >= 0) {
		*len = strlen(t);   /* base ends with "}\n" */
	} else {
		t = NULL;
	}
	free(st);
	free(ops);
	free(kept);
	free(uns);
	free(pend);
	free(wb);
	return t;
}

void mbfs_control_stat(const struct mbfs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	/* the mounting user's alone, whatever -o uid/gid or allow_other say:
	 * it drives the mount (invalidate, sync) and names mbexec's socket */
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	size_t len = fs->control_len;
	free(control_text(fs, &len));
	st->st_size = (off_t)len;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((len + 511) / 512);
	st->st_ino = (ino_t)mbfs_ino(fs, "/" MB_CONTROL_NAME);
}

int mbfs_control_access(uid_t caller)
{
	/* default_permissions already refuses others (mode 0600); this holds
	 * even if the kernel was not asked to check */
	return caller == getuid() || caller == 0 ? 0 : -EACCES;
}

struct control_snap {
	size_t len;
	char *text;
};

uint64_t mbfs_control_open(const struct mbfs *fs, int flags)
{
	if ((flags & O_ACCMODE) == O_WRONLY)
		return 1;
	struct control_snap *s = malloc(sizeof(*s));
	if (s && !(s->text = control_text(fs, &s->len))) {
		free(s);
		s = NULL;
	}
	return (uint64_t)(uintptr_t)s | 1;   /* malloc'd: the bit is free */
}

void mbfs_control_release(uint64_t fh)
{
	struct control_snap *s = (struct control_snap *)(uintptr_t)(fh & ~1ull);
	if (s)
		free(s->text);
	free(s);
}

int mbfs_control_read(const struct mbfs *fs, uint64_t fh, char *buf,
		      size_t size, off_t off)
{
	if (off < 0)
		return -EINVAL;
	const struct control_snap *s =
		(const struct control_snap *)(uintptr_t)(fh & ~1ull);
	size_t len;
	char *now = s ? NULL : control_text(fs, &len);
	if (!s && !now)
		return -ENOMEM;
	const char *text = s ? s->text : now;
	if (s)
		len = s->len;
	size_t n = (size_t)off >= len ? 0 : len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, text + off, n);
	free(now);
	return (int)n;
}

void mbfs_invalidate_everything(struct mbfs *fs)
{
	/* what was listed comes back in one exec at the next lookup */
	mbfs_relist_note(fs);
	mbfs_cache_invalidate_all(fs->cache);
	mbfs_prefetch_forget(fs);
	/* nodes before copies: a node being let go meanwhile is either
	 * unshared here, or its copy is put before the drop (and dropped),
	 * or after it (and discarded: mbfs_data_put_clean) */
	mbfs_node_invalidate_all(fs);
	mbfs_data_drop_all(fs->data);
	/* the kernel's copies last, so none is refilled from an old one;
	 * mbexec's next command must see them gone */
	mbfs_kcache_stale_all(fs->kcache);
	if (!mbfs_kcache_wait(fs->kcache, MBFS_KCACHE_WAIT_MS))
		mb_log(MB_LOG_DEBUG, "the kernel's caches are still being "
		       "invalidated");
}

int mbfs_control_sync(struct mbfs *fs)
{
	/* what is queued goes now, with what programs wrote to files they
	 * still hold open: a command reads it, as on a local disk */
	mbfs_hidden_settle(fs, NULL);   /* names removed while open */
	int rcs[4];
	rcs[0] = mbfs_node_close_open(fs);
	rcs[1] = mbfs_wbq_sync(fs);
	rcs[2] = mbfs_batch_sync(fs);
	/* large files being uploaded at their close, in parts */
	rcs[3] = mbfs_wbq_upload_wait(fs);
	/* a failure first; conflicts alone (-EEXIST: both versions kept) let
	 * a command start */
	int rc = 0;
	for (size_t i = 0; i < sizeof(rcs) / sizeof(rcs[0]); i++)
		if (rcs[i] && (!rc || rc == -EEXIST))
			rc = rcs[i];
	/* a failed batch dropped what the kernel holds of its paths (times or
	 * files that never landed): gone before the caller looks again */
	if (rc && !mbfs_kcache_wait(fs->kcache, MBFS_KCACHE_WAIT_MS))
		mb_log(MB_LOG_DEBUG, "the kernel's caches are still being "
		       "invalidated");
	if (!rc)   /* which files those held open are */
		mbfs_follow_before(fs);
	return rc;
}

/* buf is the line cmd, with or without its newline. */
static bool is_command(const char *buf, size_t size, const char *cmd)
{
	size_t cl = strlen(cmd);
	return (size == cl && memcmp(buf, cmd, cl) == 0) ||
	       (size == cl - 1 && memcmp(buf, cmd, cl - 1) == 0);
}

int mbfs_control_write(struct mbfs *fs, const char *buf, size_t size)
{
	if (is_command(buf, size, MB_CONTROL_INVALIDATE)) {
		mbfs_follow_after(fs);   /* files held open that it renamed */
		mbfs_invalidate_everything(fs);
		mb_log(MB_LOG_DEBUG, "caches invalidated through the control file");
		return (int)size;
	}
	if (is_command(buf, size, MB_CONTROL_SYNC)) {
		int rc = mbfs_control_sync(fs);
		mb_log(MB_LOG_DEBUG, "sync through the control file: %s",
		       rc ? strerror(-rc) : "done");
		return rc ? rc : (int)size;
	}
	if (is_command(buf, size, MBFS_UNSENT_SEEN)) {
		mbfs_unsent_seen(fs);
		return (int)size;
	}
	return -EINVAL;
}
