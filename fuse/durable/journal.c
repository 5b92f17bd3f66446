/* journal.c: durable local state of a mount (see journal.h): the run
 * directory, records of dirty copies, kept/; the replay of ended mounts is
 * journal_replay.c, the outbox log journal_outbox.c, staging notes
 * journal_stage.c. Records and notes are
 * small JSON texts, replaced whole, so a reader sees a whole one or none:
 * a record is an extended attribute of its working copy (one setxattr,
 * no file of its own: a file per record doubled the inodes a storm of
 * small files makes and removes), or, where the cache's filesystem has
 * no room or no user attributes, a file written to a temporary name and
 * renamed, as the notes are. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/durable/journal.h"
#include "fuse/durable/journal_int.h"

bool mbfs_journal_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The whole file at path (malloc'd, NUL-terminated) or NULL. */
char *mbfs_journal_read_small(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *buf = malloc(REC_MAX + 1);
	size_t len = 0;
	while (buf && len < REC_MAX) {
		ssize_t r = read(fd, buf + len, REC_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static bool get_str(const cJSON *o, const char *key, char *dst, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= n)
		return false;
	memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
	return true;
}

static bool get_num(const cJSON *o, const char *key, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9e15)
		return false;
	*out = v->valuedouble;
	return true;
}

bool mbfs_journal_parse_owner(const cJSON *o, struct mbfs_jrec *r)
{
	return get_str(o, "apiUrl", r->api_url, sizeof(r->api_url)) &&
	       get_str(o, "id", r->ident.id, sizeof(r->ident.id)) &&
	       get_str(o, "createdAt", r->ident.created_at,
		       sizeof(r->ident.created_at));
}

bool mbfs_journal_same_container(const struct mbfs_journal *j,
				 const struct mbfs_jrec *r)
{
	return strcmp(r->api_url, j->api_url) == 0 &&
	       strcmp(r->ident.id, j->who.id) == 0;
}

int mbfs_journal_parse_rec(const char *text, struct mbfs_jrec *r)
{
	cJSON *o = text ? cJSON_Parse(text) : NULL;
	double size = 0, mtime = 0, mode = 0;
	memset(r, 0, sizeof(*r));
	bool ok = cJSON_IsObject(o) && mbfs_journal_parse_owner(o, r) &&
		  get_str(o, "path", r->rpath, sizeof(r->rpath));
	const cJSON *fresh = o ? cJSON_GetObjectItemCaseSensitive(o, "fresh") : NULL;
	const cJSON *base = o ? cJSON_GetObjectItemCaseSensitive(o, "base") : NULL;
	r->fresh = cJSON_IsTrue(fresh);
	if (ok && r->fresh)
		ok = get_num(o, "mode", &mode);
	r->mode = (unsigned)mode & 07777;
	if (ok && cJSON_IsObject(base)) {
		ok = get_num(base, "size", &size) && get_num(base, "mtime", &mtime);
		if (!get_str(base, "sha256", r->base_sha, sizeof(r->base_sha)))
			r->base_sha[0] = '\0';
		r->base_known = true;
		r->base_size = (uint64_t)size;
		r->base_mtime = (time_t)mtime;
	}
	cJSON_Delete(o);
	return ok ? 0 : -EINVAL;
}

/* The attribute of local's record: named after local, as a data file
 * may have two names (a link made here, data.h), each with its record. */
static void rec_key(const char *local, char key[REC_KEY_MAX])
{
	const char *base = strrchr(local, '/');
	snprintf(key, REC_KEY_MAX, REC_XATTR "%s", base ? base + 1 : local);
}

int mbfs_journal_put(struct mbfs_journal *j, const char *local,
		     const struct mbfs_jrec *r)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s" REC_SUFFIX, local) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return -ENOMEM;
	cJSON_AddNumberToObject(o, "v", 1);
	mbfs_journal_owner_json(j, o);
	cJSON_AddStringToObject(o, "path", r->rpath);
	cJSON_AddBoolToObject(o, "fresh", r->fresh);
	if (r->fresh)
		cJSON_AddNumberToObject(o, "mode", r->mode & 07777);
	if (!r->fresh && r->base_known) {
		cJSON *b = cJSON_AddObjectToObject(o, "base");
		if (b) {
			cJSON_AddNumberToObject(b, "size", (double)r->base_size);
			cJSON_AddNumberToObject(b, "mtime", (double)r->base_mtime);
			if (r->base_sha[0])
				cJSON_AddStringToObject(b, "sha256", r->base_sha);
		}
	}
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!text)
		return -ENOMEM;
	int rc = 0;
	char key[REC_KEY_MAX];
	rec_key(local, key);
	if (setxattr(local, key, text, strlen(text), 0)) {
		rc = -errno;
		/* no user attributes here, or none this long (a long path):
		 * a file of its own */
		if (rc == -ENOTSUP || rc == -E2BIG || rc == -ENOSPC ||
		    rc == -ERANGE)
			rc = mbfs_journal_write_file(path, text);
	}
	free(text);
	return rc;
}

int mbfs_journal_drop(struct mbfs_journal *j, const char *local)
{
	char path[PATH_MAX], key[REC_KEY_MAX];
	int rc = 0;
	(void)j;
	rec_key(local, key);
	if (removexattr(local, key) == 0)
		return 0;   /* it had no file */
	if (errno != ENODATA && errno != ENOENT && errno != ENOTSUP) {
		rc = -errno;
		mb_log(MB_LOG_WARN, "cannot remove the journal record of '%s': "
		       "%s", local, strerror(errno));
	}
	if (snprintf(path, sizeof(path), "%s" REC_SUFFIX, local) < (int)sizeof(path) &&
	    unlink(path) && errno != ENOENT) {
		rc = -errno;
		mb_log(MB_LOG_WARN, "cannot remove journal record '%s': %s", path,
		       strerror(errno));
	}
	return rc;
}

/* The record kept as an attribute of the data file local (malloc'd), or
 * NULL when it has none. */
char *mbfs_journal_read_rec_xattr(const char *local)
{
	char key[REC_KEY_MAX];
	rec_key(local, key);
	char *text = malloc(REC_MAX + 1);
	ssize_t n = text ? getxattr(local, key, text, REC_MAX) : -1;
	if (n < 0) {
		free(text);
		return NULL;
	}
	text[n] = '\0';
	return text;
}

bool mbfs_journal_has_rec_xattr(const char *local)
{
	char key[REC_KEY_MAX];
	rec_key(local, key);
	return getxattr(local, key, NULL, 0) >= 0;
}

/* ---- kept/ ---- */

/* fsync of the directory path: its names are on disk. 0 or -1 (errno). */
static int sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* A file moved under kept/ (out) on disk, and its names: its directory and
 * those mb_mkdir_p may have made above it, up to kept/, and the run
 * directory it left. */
static void sync_kept(struct mbfs_journal *j, const char *out)
{
	char dir[PATH_MAX];
	int fd = open(out, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		mb_log(MB_LOG_WARN, "cannot sync '%s': %s", out, strerror(errno));
	if (fd >= 0)
		close(fd);
	snprintf(dir, sizeof(dir), "%s", out);
	size_t top = strlen(j->keptdir);
	char *slash;
	while ((slash = strrchr(dir, '/')) && (size_t)(slash - dir) >= top) {
		*slash = '\0';
		if (sync_dir(dir))
			mb_log(MB_LOG_WARN, "cannot sync '%s': %s", dir,
			       strerror(errno));
	}
	if (fsync(j->runfd))
		mb_log(MB_LOG_WARN, "cannot sync '%s': %s", j->run,
		       strerror(errno));
}

static void note_kept(struct mbfs_journal *j, const char *rpath,
		      const char *file, const char *why)
{
	struct kept *k = calloc(1, sizeof(*k));
	if (!k || !(k->rpath = strdup(rpath ? rpath : "")) ||
	    !(k->file = strdup(file)) || !(k->why = strdup(why ? why : ""))) {
		if (k) {
			free(k->rpath);
			free(k->file);
		}
		free(k);
		return;
	}
	pthread_mutex_lock(&j->lock);
	k->next = j->kept;
	j->kept = k;
	pthread_mutex_unlock(&j->lock);
}

int mbfs_journal_keep(struct mbfs_journal *j, const char *local,
		      const char *rpath, const char *why, char *out,
		      size_t outsz)
{
	char stamp[32], hex[9];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (mb_random_hex(hex, 4))
		snprintf(hex, sizeof(hex), "%08lx", (unsigned long)getpid());
	/* the guest path under kept/, so the tree shows where it belongs */
	const char *rel = rpath ? rpath + strspn(rpath, "/") : "";
	int n = rpath && *rel
		? snprintf(out, outsz, "%s/%s.%s.%s", j->keptdir, rel, stamp, hex)
		: snprintf(out, outsz, "%s/unknown/%s.%s.%s", j->keptdir,
			   strrchr(local, '/') ? strrchr(local, '/') + 1 : local,
			   stamp, hex);
	if (n < 0 || (size_t)n >= outsz)
		return -ENAMETOOLONG;
	char *slash = strrchr(out, '/');
	*slash = '\0';
	int rc = mb_mkdir_p(out, 0700);
	*slash = '/';
	if (rc == 0 && rename(local, out))
		rc = -errno;
	if (rc && rc != -ENOENT && rpath) {
		/* no room for the directories (or a name in the way): kept/
		 * itself exists, so a flat name still needs no space */
		const char *base = strrchr(rpath, '/') ? strrchr(rpath, '/') + 1 : rpath;
		n = snprintf(out, outsz, "%s/%.150s.%s.%s", j->keptdir, base,
			     stamp, hex);
		rc = n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG
			: rename(local, out) ? -errno : 0;
	}
	if (!rc) {
		sync_kept(j, out);
		note_kept(j, rpath, out, why);
	}
	return rc;
}

char *mbfs_journal_kept_json(struct mbfs_journal *j)
{
	cJSON *a = cJSON_CreateArray();
	char *text = NULL;
	if (!a)
		return NULL;
	pthread_mutex_lock(&j->lock);
	for (struct kept *k = j->kept; k; k = k->next) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddStringToObject(o, "path", k->rpath);
		cJSON_AddStringToObject(o, "file", k->file);
		cJSON_AddStringToObject(o, "reason", k->why);
		cJSON_AddItemToArray(a, o);
	}
	bool any = j->kept != NULL;
	pthread_mutex_unlock(&j->lock);
	if (any)
		text = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return text;
}

/* ---- the run directory ---- */

const char *mbfs_journal_run_dir(const struct mbfs_journal *j)
{
	return j->run;
}

const char *mbfs_journal_kept_dir(const struct mbfs_journal *j)
{
	return j->keptdir;
}

/* Remove every file in dir that is not needed: with keep_state, records,
 * their data, staging lists and the lock stay. *left: files still there. */
void mbfs_journal_sweep_dir(const char *dir, bool keep_state, size_t *left)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char p[PATH_MAX], rec[PATH_MAX];
	*left = 0;
	if (!dp)
		return;
	while ((de = readdir(dp))) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p) ||
		    snprintf(rec, sizeof(rec), "%s" REC_SUFFIX, p) >= (int)sizeof(rec))
			continue;
		bool state = mbfs_journal_ends_with(name, REC_SUFFIX) ||
			     mbfs_journal_ends_with(name, STG_SUFFIX) ||
			     strcmp(name, LOCK_NAME) == 0 ||
			     strcmp(name, OUTBOX_NAME) == 0 ||
			     access(rec, F_OK) == 0 || mbfs_journal_has_rec_xattr(p);
		if (keep_state && state) {
			(*left)++;
			continue;
		}
		if (unlink(p))
			(*left)++;
	}
	closedir(dp);
}

/* Remove the run directory dir when nothing in it is still needed. */
void mbfs_journal_close_dir(const char *dir)
{
	size_t left;
	mbfs_journal_sweep_dir(dir, true, &left);
	if (left == 1) {   /* the lock alone */
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/" LOCK_NAME, dir) < (int)sizeof(p))
			unlink(p);
		rmdir(dir);
	}
}

/* Ask ext2/3/4 to place each run directory of dir in a block group of
 * its own, as it places top-level directories (the Orlov allocator's "top
 * of a hierarchy" flag, chattr +T): a mount's copies are made in its run
 * directory's group, and ext4 without a journal scans the inodes a group
 * freed in the last minutes at every file it makes there, so the copies
 * the mount before removed would slow this one's creates down. Other
 * file systems have no such flag: nothing changes there. */
static void spread_runs(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int flags;
	if (fd < 0)
		return;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
		flags |= FS_TOPDIR_FL;
		(void)ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
}

int mbfs_journal_open(const char *dir, const char *api_url,
		      const struct mb_ident *who, struct mbfs_journal **out,
		      struct mb_err *err)
{
	struct mbfs_journal *j = calloc(1, sizeof(*j));
	char hex[17], fresh[PATH_MAX], lock[PATH_MAX];
	int rc;
	if (!j)
		return mb_err_set(err, ENOMEM, "out of memory");
	j->lockfd = -1;
	j->runfd = -1;
	j->opfd = -1;
	pthread_mutex_init(&j->oplock, NULL);
	mbfs_journal_commit_init(j);
	snprintf(j->api_url, sizeof(j->api_url), "%s", api_url);
	j->who = *who;
	pthread_mutex_init(&j->lock, NULL);
	if (!(j->dir = strdup(dir)) || asprintf(&j->keptdir, "%s/kept", dir) < 0) {
		j->keptdir = NULL;
		rc = mb_err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = mb_mkdir_p(j->keptdir, 0700);
	if (!rc)
		spread_runs(dir);
	if (!rc)
		rc = mb_random_hex(hex, 8);
	if (rc) {
		rc = mb_err_set(err, -rc, "cannot create cache directory '%s': %s",
				dir, strerror(-rc));
		goto fail;
	}
	/* locked under a name no replay looks at, then renamed: a starting
	 * mount is never mistaken for an ended one */
	if (snprintf(fresh, sizeof(fresh), "%s/.new.%s", dir, hex) >= (int)sizeof(fresh) - 8) {
		rc = mb_err_set(err, ENAMETOOLONG, "cache directory path too long");
		goto fail;
	}
	snprintf(lock, sizeof(lock), "%.*s/" LOCK_NAME, PATH_MAX - 8, fresh);
	if (mkdir(fresh, 0700) ||
	    (j->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0 ||
	    flock(j->lockfd, LOCK_EX | LOCK_NB) ||
	    asprintf(&j->run, "%s/" RUN_PREFIX "%s", dir, hex) < 0 ||
	    rename(fresh, j->run)) {
		rc = mb_err_set(err, errno ? errno : EIO, "cannot create cache "
				"directory '%s': %s", fresh, strerror(errno));
		if (j->lockfd >= 0)
			unlink(lock);
		rmdir(fresh);
		goto fail;
	}
	/* the run directory's fd, for the commits' fsync; its own name in
	 * DIR is made durable now, once (a file system that cannot sync a
	 * directory still makes a cache: said, not refused) */
	j->runfd = open(j->run, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->runfd < 0) {
		rc = mb_err_set(err, errno ? errno : EIO, "cannot open cache "
				"directory '%s': %s", j->run, strerror(errno));
		goto fail;
	}
	if (sync_dir(dir) && errno != EINVAL)
		mb_log(MB_LOG_WARN, "cannot sync cache directory '%s': %s",
		       dir, strerror(errno));
	*out = j;
	return 0;
fail:
	if (j->runfd >= 0)
		close(j->runfd);
	if (j->lockfd >= 0)
		close(j->lockfd);
	free(j->run);
	free(j->keptdir);
	free(j->dir);
	pthread_mutex_destroy(&j->lock);
	pthread_mutex_destroy(&j->oplock);
	mbfs_journal_commit_destroy(j);
	free(j);
	return rc;
}

void mbfs_journal_close(struct mbfs_journal *j)
{
	if (!j)
		return;
	/* the outbox log goes when nothing in it is pending */
	if (j->opfd >= 0)
		close(j->opfd);
	char ob[PATH_MAX];
	if (!j->ops_pending &&
	    snprintf(ob, sizeof(ob), "%s/" OUTBOX_NAME, j->run) < (int)sizeof(ob))
		unlink(ob);
	mbfs_journal_close_dir(j->run);
	close(j->runfd);
	close(j->lockfd);
	while (j->kept) {
		struct kept *k = j->kept;
		j->kept = k->next;
		free(k->rpath);
		free(k->file);
		free(k->why);
		free(k);
	}
	mbfs_journal_free_stages(j);
	pthread_mutex_destroy(&j->lock);
	pthread_mutex_destroy(&j->oplock);
	mbfs_journal_commit_destroy(j);
	free(j->run);
	free(j->keptdir);
	free(j->dir);
	free(j);
}
