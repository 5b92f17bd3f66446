/* main.c: mbfs options, validation and session.
 *
 *   mbfs [options] CONTAINER[@GENERATION][:REMOTE_DIR] MOUNTPOINT
 *   mbfs --create [--catalog ID] [--size SIZE] [options] MOUNTPOINT
 *   mbfs --list [--json]     (list.c)
 *   mbfs --stop [--force] ID@GENERATION     (list.c)
 *   mbfs --status [--wait] MOUNTPOINT     (status.c)
 *   mbfs -u [--timeout T] MOUNTPOINT     (umount.c)
 *
 * Everything that can be wrong with the arguments, the credentials, the
 * container or the remote directory is checked before anything is mounted
 * and reported in one line; only then does the session mount, daemonise
 * (unless -f) and run the multithreaded loop. The API key never reaches
 * argv, the logs or the control file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/face/help.h"
#include "fuse/face/ll.h"
#include "fuse/mbfs.h"

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "common/config.h"
#include "common/cred.h"
#include "common/log.h"
#include "common/mountinfo.h"
#include "common/util.h"
#include "fuse/session/attach.h"
#include "fuse/outbox/batch.h"
#include "fuse/cli/status.h"
#include "fuse/outbox/gone.h"
#include "fuse/cli/umount.h"
#include "fuse/outbox/newdir.h"
#include "fuse/outbox/wbq.h"
#include "fuse/cache/cache.h"
#include "fuse/cli/create.h"
#include "fuse/durable/data.h"
#include "fuse/ns/hidden.h"
#include "fuse/view/cachesink.h"
#include "fuse/cache/inode.h"
#include "fuse/cache/kcache.h"
#include "fuse/durable/journal.h"
#include "fuse/session/lease.h"
#include "fuse/cli/list.h"
#include "fuse/node/node.h"
#include "fuse/node/nodeset.h"
#include "fuse/node/node_int.h"
#include "fuse/bulk/prefetch.h"
#include "fuse/bulk/relist.h"
#include "fuse/face/ops.h"
#include "fuse/session/recover.h"
#include "fuse/outbox/unsent.h"
#include "fuse/face/warm.h"
#include "fuse/cli/when.h"
#include "fuse/session/watch.h"

#define DEFAULT_TIMEOUT_MS 20000
#define OP_TIMEOUT_MS 60000
#define DATA_CAP_BYTES (2ULL << 30)

struct mbfs *mbfs_fs;

enum { KEY_HELP, KEY_VERSION, KEY_RO, KEY_VERBOSE, KEY_IGNORE };

#define OPT(t, f, v) { t, offsetof(struct mbfs_opts, f), v }
static const struct fuse_opt mbfs_opt_spec[] = {
	OPT("attr_timeout=%s", attr_timeout, 0),
	OPT("entry_timeout=%s", attr_timeout, 0),
	OPT("dir_timeout=%s", dir_timeout, 0),
	OPT("negative_timeout=%s", negative_timeout, 0),
	OPT("op_timeout=%s", op_timeout, 0),
	OPT("keepalive=%s", keepalive, 0),
	OPT("cache_dir=%s", cache_dir, 0),
	OPT("log_file=%s", log_file, 0),
	OPT("key_file=%s", key_file, 0),
	OPT("api_url=%s", api_url, 0),
	OPT("uid=%s", uid, 0),
	OPT("sync_close", sync_close, 1),
	OPT("bulk_read=%s", bulk_read, 0),
	OPT("umask=%s", umask, 0),
	OPT("direct_io", direct_io, 1),
	OPT("gid=%s", gid, 0),
	OPT("--create", create, 1),
	OPT("--catalog=%s", catalog, 0),
	OPT("--catalog %s", catalog, 0),
	OPT("--size=%s", size, 0),
	OPT("--size %s", size, 0),
	/* fuse_opt applies every template that matches, and "--profile %s"
	 * matches "--profile=NAME" too (as "=NAME"): "=%s" comes last */
	OPT("profile=%s", profile, 0),
	OPT("--profile %s", profile, 0),
	OPT("--profile=%s", profile, 0),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-v", KEY_VERBOSE),
	FUSE_OPT_KEY("-vv", KEY_VERBOSE),
	FUSE_OPT_KEY("--verbose", KEY_VERBOSE),
	FUSE_OPT_KEY("ro", KEY_RO),
	/* fstab / mount(8) words that mean nothing to a FUSE mount */
	FUSE_OPT_KEY("_netdev", KEY_IGNORE),
	FUSE_OPT_KEY("noauto", KEY_IGNORE),
	FUSE_OPT_KEY("auto", KEY_IGNORE),
	FUSE_OPT_KEY("user", KEY_IGNORE),
	FUSE_OPT_KEY("users", KEY_IGNORE),
	FUSE_OPT_KEY("nouser", KEY_IGNORE),
	FUSE_OPT_KEY("owner", KEY_IGNORE),
	FUSE_OPT_KEY("nofail", KEY_IGNORE),
	FUSE_OPT_KEY("defaults", KEY_IGNORE),
	/* libfuse's high-level options that mbfs always set its own way:
	 * accepted, as they were, and without effect */
	FUSE_OPT_KEY("kernel_cache", KEY_IGNORE),
	FUSE_OPT_KEY("auto_cache", KEY_IGNORE),
	FUSE_OPT_KEY("noauto_cache", KEY_IGNORE),
	FUSE_OPT_KEY("ac_attr_timeout=", KEY_IGNORE),
	FUSE_OPT_KEY("hard_remove", KEY_IGNORE),
	FUSE_OPT_KEY("use_ino", KEY_IGNORE),
	FUSE_OPT_KEY("readdir_ino", KEY_IGNORE),
	FUSE_OPT_KEY("nullpath_ok", KEY_IGNORE),
	FUSE_OPT_KEY("rw", KEY_IGNORE),
	FUSE_OPT_KEY("comment=", KEY_IGNORE),
	FUSE_OPT_END
};

/* fuse_opt writes the templates at offsets into the data pointer, so the
 * options come first. */
struct parse_state {
	struct mbfs_opts o;
	char *nonopt[3];
	int nnonopt;
};

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_state *ps = data;
	(void)outargs;
	switch (key) {
	case KEY_HELP:
		ps->o.show_help = 1;
		return 0;
	case KEY_VERSION:
		ps->o.show_version = 1;
		return 0;
	case KEY_RO:
		ps->o.ro = 1;
		return 1;
	case KEY_VERBOSE:
		ps->o.verbose += strcmp(arg, "-vv") == 0 ? 2 : 1;
		return 0;
	case KEY_IGNORE:
		return 0;
	case FUSE_OPT_KEY_OPT:
		/* libfuse's own -d (and -o debug) go on to it; it logs API
		 * requests too, as mbfs(1) says */
		if (strcmp(arg, "-d") == 0 || strcmp(arg, "debug") == 0)
			ps->o.debug = 1;
		return strncmp(arg, "x-", 2) == 0 ? 0 : 1;
	case FUSE_OPT_KEY_NONOPT:
		if (ps->nnonopt >= 3)
			return -1;
		ps->nonopt[ps->nnonopt++] = strdup(arg);
		return 0;
	default:
		return 1;
	}
}

/* libfuse builds some messages with several calls: collect a line per
 * thread and log it whole. */
static __thread char fuse_line[1024];
static __thread size_t fuse_line_len;

static void fuse_log_to_mb(enum fuse_log_level level, const char *fmt,
			   va_list ap)
{
	char *buf = fuse_line;
	size_t room = sizeof(fuse_line) - fuse_line_len;
	int n = vsnprintf(buf + fuse_line_len, room, fmt, ap);
	if (n > 0)
		fuse_line_len += (size_t)n < room ? (size_t)n : room - 1;
	if (fuse_line_len == 0 || (buf[fuse_line_len - 1] != '\n' &&
				   fuse_line_len < sizeof(fuse_line) - 1))
		return;
	while (fuse_line_len && buf[fuse_line_len - 1] == '\n')
		buf[--fuse_line_len] = '\0';
	enum mb_log_level l = level <= FUSE_LOG_ERR ? MB_LOG_ERR
		: level == FUSE_LOG_WARNING ? MB_LOG_WARN
		: level <= FUSE_LOG_INFO ? MB_LOG_INFO : MB_LOG_DEBUG;
	static const char unknown[] = "fuse: unknown option(s): `";
	size_t u = sizeof(unknown) - 1;
	if (fuse_line_len > u && strncmp(buf, unknown, u) == 0 &&
	    buf[fuse_line_len - 1] == '\'')
		/* said as mbfs's own usage errors are */
		fprintf(stderr, "mbfs: unknown option '%.*s' (see mbfs --help)\n",
			(int)(fuse_line_len - u - 1), buf + u);
	else if (fuse_line_len)
		mb_log(l, "%s", buf);
	fuse_line_len = 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mbfs: %s\n", msg);
	return 1;
}

/* libfuse's options (those mbfs passes through) checked by libfuse itself,
 * on a copy, before anything is asked of the service: a typo must not
 * leave a container started by --create unmounted. 0 when libfuse takes
 * them; else 1, libfuse having said which (fuse_log_to_mb). */
static int check_fuse_options(const struct fuse_args *args)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts cmd;
	int rc = 1;
	memset(&cmd, 0, sizeof(cmd));
	for (int i = 0; i < args->argc; i++)
		if (fuse_opt_add_arg(&copy, args->argv[i])) {
			fail("out of memory");
			goto out;
		}
	if (fuse_parse_cmdline(&copy, &cmd))
		goto out;
	struct fuse_session *se = fuse_session_new(&copy, &none, sizeof(none), NULL);
	if (se) {
		fuse_session_destroy(se);
		rc = 0;
	}
out:
	free(cmd.mountpoint);
	fuse_opt_free_args(&copy);
	return rc;
}

static int parse_timeout(const char *s, const char *name, uint64_t def,
			 uint64_t *out)
{
	if (!s) {
		*out = def;
		return 0;
	}
	if (mb_parse_duration_ms(s, out))
		return fail("invalid %s '%s': use seconds, e.g. %s=20 or %s=500ms",
			    name, s, name, name);
	return 0;
}

static int parse_id(const char *s, const char *name, unsigned def,
		    unsigned *out)
{
	uint64_t v;
	if (!s) {
		*out = def;
		return 0;
	}
	if (mb_parse_u64(s, 0, 0xfffffffeu, &v))
		return fail("invalid %s '%s': use a number", name, s);
	*out = (unsigned)v;
	return 0;
}

/* Where the log goes once mounted (run_session). */
struct log_target {
	char path[PATH_MAX];
	bool asked;             /* -o log_file: always, -f or not */
};

/* -o log_file: made absolute (the daemon runs in /) and tried now, so
 * that a bad path is reported before anything is mounted. */
static int log_file_path(const char *f, struct log_target *lt)
{
	char cwd[PATH_MAX] = "";
	if (f[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return fail("cannot use log file '%s': %s", f, strerror(errno));
	if (snprintf(lt->path, sizeof(lt->path), "%s%s%s", cwd,
		     cwd[0] ? "/" : "", f) >= (int)sizeof(lt->path))
		return fail("log file path '%s' too long", f);
	int fd = open(lt->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		      O_NOCTTY, 0600);
	if (fd < 0)
		return fail("cannot open log file '%s': %s", f, strerror(errno));
	close(fd);
	lt->asked = true;
	return 0;
}

/* The default data cache directory for this mount. */
static int default_cache_dir(const struct mbfs *fs, char *out, size_t n)
{
	const char *x = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char base[PATH_MAX], seed[MB_URL_MAX + 2 * MB_PATH_MAX + 128], hex[65];
	if (x && x[0] == '/')
		snprintf(base, sizeof(base), "%s/mbfs", x);
	else if (home && home[0] == '/')
		snprintf(base, sizeof(base), "%s/.cache/mbfs", home);
	else
		return fail("cannot find a cache directory: set HOME, "
			    "XDG_CACHE_HOME or -o cache_dir=DIR");
	/* one per container slot, wherever and whichever generation it is
	 * mounted: a remount finds what an ended mount left (journal.h) */
	snprintf(seed, sizeof(seed), "%s %s", fs->api_url, fs->ident.id);
	mb_sha256_hex(seed, strlen(seed), hex);
	if (snprintf(out, n, "%s/%s-%.12s", base, fs->ident.id, hex) >= (int)n)
		return fail("cache directory path too long");
	return 0;
}

static int new_client(struct mbfs *fs, const char *key, struct mb_client **c)
{
	struct mb_client_opts co = {
		.api_url = fs->api_url, .api_key = key,
		.op_timeout_ms = (long)fs->op_ms, .use_limiter = true,
		.log_requests = fs->log_requests,
	};
	struct mb_err err;
	mb_err_clear(&err);
	if (mb_client_new(&co, c, &err))
		return fail("cannot set up the API client: %s", err.msg);
	return 0;
}

/* One validation block: everything before anything is mounted. */
static int validate(struct mbfs *fs, struct mbfs_opts *o, struct parse_state *ps,
		    struct log_target *lt, char **key)
{
	struct mb_err err;
	char dir[MB_PATH_MAX] = "";
	mb_err_clear(&err);
	int want = o->create ? 1 : 2;
	if (ps->nnonopt != want)
		return fail(ps->nnonopt < want ? "missing %s (see mbfs --help)"
			    : "too many arguments (see mbfs --help)%s",
			    ps->nnonopt < want ? (want == 2 && ps->nnonopt == 0
			    ? "CONTAINER and MOUNTPOINT" : "MOUNTPOINT") : "");
	o->mountpoint = ps->nonopt[want - 1];
	if (o->create && ps->nnonopt == 1) {
		snprintf(fs->root, sizeof(fs->root), "%s", MBFS_DEFAULT_ROOT);
	} else if (!o->create) {
		o->spec = ps->nonopt[0];
		if (mb_ident_parse_spec(o->spec, &fs->ident, dir, &err))
			return fail("%s", err.msg);
		if (!dir[0])
			snprintf(dir, sizeof(dir), "%s", MBFS_DEFAULT_ROOT);
		if (dir[0] != '/')
			return fail("remote directory '%s' must be absolute", dir);
		size_t n = strlen(dir);
		while (n > 0 && dir[n - 1] == '/')
			dir[--n] = '\0';
		snprintf(fs->root, sizeof(fs->root), "%s", dir);
	}
	if (!o->create && (o->catalog || o->size))
		return fail("--catalog and --size only go with --create");
	if (parse_timeout(o->attr_timeout, "attr_timeout", DEFAULT_TIMEOUT_MS,
			  &fs->attr_ms) ||
	    parse_timeout(o->dir_timeout, "dir_timeout", DEFAULT_TIMEOUT_MS,
			  &fs->dir_ms) ||
	    parse_timeout(o->negative_timeout, "negative_timeout",
			  DEFAULT_TIMEOUT_MS, &fs->neg_ms) ||
	    parse_timeout(o->op_timeout, "op_timeout", OP_TIMEOUT_MS, &fs->op_ms))
		return 1;
	if (fs->op_ms < 1000)
		return fail("op_timeout must be at least 1s");
	if (parse_timeout(o->keepalive, "keepalive", 0, &fs->keepalive_ms))
		return 1;
	if (fs->keepalive_ms && fs->keepalive_ms < 1000)
		return fail("keepalive must be 0 (off) or at least 1s");
	unsigned uid, gid;
	if (parse_id(o->uid, "uid", getuid(), &uid) ||
	    parse_id(o->gid, "gid", getgid(), &gid))
		return 1;
	fs->uid = uid;
	fs->gid = gid;
	fs->ro = o->ro;
	fs->log_requests = o->verbose > 0 || o->debug;
	fs->sync_close = o->sync_close != 0;
	fs->direct_io = o->direct_io != 0;
	if (o->umask) {
		char *end;
		unsigned long m = strtoul(o->umask, &end, 8);
		if (!*o->umask || *end || m > 0777)
			return fail("invalid umask '%s': use octal, e.g. umask=077",
				    o->umask);
		fs->set_mode = true;
		fs->umask = (mode_t)m;
	}
	if (o->bulk_read && strcmp(o->bulk_read, "0") &&
	    strcmp(o->bulk_read, "1"))
		return fail("bulk_read must be 0 or 1");
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(o->mountpoint, real) || stat(real, &st))
		return fail("cannot use mountpoint '%s': %s", o->mountpoint,
			    strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail("mountpoint '%s' is not a directory", o->mountpoint);
	/* a second mount would hide the first, and --create would start a
	 * sandbox for nothing: refused before the service is asked */
	if (mb_mountinfo_refuse(real, &err))
		return fail("%s", err.msg);
	snprintf(fs->mountpoint, sizeof(fs->mountpoint), "%s", real);
	if (o->log_file && log_file_path(o->log_file, lt))
		return 1;

	/* options, then the environment, then the profile (cred.h) */
	char *url = NULL;
	const char *env_url = getenv("MAINBRELLA_API_URL");
	struct mb_profile prof;
	if (mb_config_select(o->profile, o->api_url ? o->api_url
			     : env_url && *env_url ? env_url : NULL, &prof, &err))
		return fail("%s", err.msg);
	if (mb_cred_api_url_for(o->api_url, &prof, &url, &err))
		return fail("%s", err.msg);
	snprintf(fs->api_url, sizeof(fs->api_url), "%s", url);
	free(url);
	if (mb_cred_load_key_for(o->key_file, &prof, key, &err))
		return fail("%s", err.msg);
	return 0;
}

static int open_state(struct mbfs *fs, struct mbfs_opts *o,
		      struct log_target *lt, struct mb_client *c);

/* Set once --create has started a container, cleared once it is mounted:
 * a failure in between leaves it running, and says so (main). */
static bool created_unmounted;

/* Identity and remote checks, then the caches. */
static int prepare(struct mbfs *fs, struct mbfs_opts *o, const char *key,
		   struct log_target *lt)
{
	struct mb_client *c;
	if (new_client(fs, key, &c))
		return 1;
	int rc = 0;
	if (o->create) {
		struct mb_err err;
		mb_err_clear(&err);
		if (mbfs_create_container(c, fs->api_url, o->catalog, o->size,
					  &fs->ident, &err))
			rc = fail("%s", err.msg);
		else {
			printf("%s@%s\n", fs->ident.id, fs->ident.created_at);
			created_unmounted = true;
		}
		fflush(stdout);
	}
	long long idle_ms = 0;
	if (!rc) {
		struct mb_err err;
		if (mbfs_attach(fs, c, &idle_ms, &err))
			rc = fail("%s", err.msg);
	}
	if (!rc)
		rc = open_state(fs, o, lt, c);
	mb_client_free(c);
	if (rc)
		return rc;
	if (!o->keepalive)
		fs->keepalive_ms = mbfs_lease_default_ms(idle_ms);
	if (o->create) {
		/* after ID@GENERATION: when it, and all in it, goes away */
		char lines[512];
		mbfs_when_create_lines(fs->expires_sec, time(NULL), idle_ms,
				       fs->keepalive_ms, lines, sizeof(lines));
		fputs(lines, stdout);
		fflush(stdout);
	}
	/* on the terminal, before daemonising, when it is already due */
	mbfs_lease_warn_if_due(fs);
	return 0;
}

/* The cache directory: this mount's journal and copies, and what ended
 * mounts of the container left in theirs, uploaded or kept before the
 * mount is visible (on the terminal: the daemon is not started yet); then
 * the caches in memory. */
static int open_state(struct mbfs *fs, struct mbfs_opts *o,
		      struct log_target *lt, struct mb_client *c)
{
	char cdir[PATH_MAX];
	if (o->cache_dir)
		snprintf(cdir, sizeof(cdir), "%s", o->cache_dir);
	else if (default_cache_dir(fs, cdir, sizeof(cdir)))
		return 1;
	if (!lt->asked &&
	    snprintf(lt->path, sizeof(lt->path), "%s/mbfs.log", cdir) >=
	    (int)sizeof(lt->path))
		return fail("cache directory path too long");
	struct mb_err err;
	mb_err_clear(&err);
	if (mbfs_journal_open(cdir, fs->api_url, &fs->ident, &fs->journal, &err) ||
	    mbfs_data_new(mbfs_journal_run_dir(fs->journal), DATA_CAP_BYTES,
			  &fs->data, &err))
		return fail("%s", err.msg);
	fs->cache = mbfs_cache_new(fs->attr_ms, fs->dir_ms, fs->neg_ms);
	fs->sink = &mbfs_view_sink;   /* before the outbox sends anything */
	fs->batch = mbfs_batch_new();
	fs->wbq = mbfs_wbq_new();
	if (fs->wbq)
		mbfs_wbq_set_files(fs->wbq, &mbfs_node_wbq_files);
	fs->newdirs = mbfs_newdirs_new();
	fs->gone = mbfs_gone_new();
	fs->inos = mbfs_inos_new();
	fs->hidden = mbfs_hidden_new();
	fs->warm = mbfs_warm_new();
	if (!o->bulk_read || strcmp(o->bulk_read, "0")) {
		fs->prefetch = mbfs_prefetch_new(mbfs_nodeset_busy);
		fs->relist = mbfs_relist_new();
	}
	if (!fs->cache || !fs->batch || !fs->wbq || !fs->newdirs || !fs->gone || !fs->inos ||
	    !fs->hidden || !fs->warm ||
	    ((!fs->prefetch || !fs->relist) &&
	     (!o->bulk_read || strcmp(o->bulk_read, "0"))))
		return fail("out of memory");
	fs->kcache = mbfs_kcache_new();
	if (!fs->kcache)
		return fail("out of memory");
	mbfs_cache_set_kcache(fs->cache, fs->kcache);
	fs->client = c;   /* the mount's own is made after daemonising */
	snprintf(fs->cache_dir, sizeof(fs->cache_dir), "%s", cdir);
	mbfs_unsent_take(fs);   /* before the replay says what it does */
	mbfs_recover(fs);
	fs->client = NULL;
	return 0;
}

/* fuse_unmount, without libfuse's complaint when the mount is already gone
 * from our namespace (see watch.c); it also releases libfuse's state. */
static void unmount_quietly(struct fuse_session *se)
{
	int saved = -1, null = -1;
	if (atomic_load(&mbfs_watch_gone)) {
		fflush(stderr);
		saved = dup(2);
		null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (saved >= 0 && null >= 0)
			dup2(null, 2);
	}
	fuse_session_unmount(se);
	if (saved >= 0) {
		dup2(saved, 2);
		close(saved);
	}
	if (null >= 0)
		close(null);
}

/* The threaded loop, with -o clone_fd, max_threads and max_idle_threads as
 * given (libfuse's default: 10 threads at most). */
static int loop_mt(struct fuse_session *se, const struct fuse_cmdline_opts *cmd)
{
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, (unsigned)cmd->clone_fd);
	fuse_loop_cfg_set_max_threads(lc, cmd->max_threads);
	if (cmd->max_idle_threads != UINT_MAX)   /* given */
		fuse_loop_cfg_set_idle_threads(lc, cmd->max_idle_threads);
	int ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

/* Mount, daemonise, loop; the libfuse steps of fuse_main, with the API
 * client created after the fork. */
static int run_session(struct mbfs *fs, struct fuse_args *args,
		       const char *key, const struct log_target *lt)
{
	struct fuse_cmdline_opts cmd;
	memset(&cmd, 0, sizeof(cmd));
	if (fuse_parse_cmdline(args, &cmd))
		return 1;
	if (cmd.debug)
		mb_log_set_level(MB_LOG_DEBUG);
	int ret = 1;
	static struct fuse_operations ops;
	mbfs_bound_ops(&ops);
	static struct mbfs_ll_opts llo;
	llo.hold = mbfs_ops_hold;
	llo.drop = mbfs_ops_drop;
	llo.rename_check = mbfs_rename_check;
	llo.set_mode = fs->set_mode;
	llo.umask = fs->umask;
	llo.direct_io = fs->direct_io;
	struct fuse_session *se = mbfs_ll_new(args, &ops, &llo);
	if (!se)
		goto out;
	if (fuse_session_mount(se, fs->mountpoint))
		goto out_destroy;
	created_unmounted = false;
	/* from now on: the file asked for; else, in the background, a file
	 * in the cache directory, one a user finds (--status names it, as
	 * the control file does), syslog only when it cannot be opened.
	 * Opened before daemonising: the daemon runs in / */
	bool to_file = lt->asked || !cmd.foreground;
	if (to_file) {
		int lrc = mb_log_use_file(lt->path);
		if (lrc)
			mb_log(MB_LOG_WARN, "cannot open log file '%s': %s",
			       lt->path, strerror(-lrc));
		to_file = lrc == 0;
	}
	if (fuse_daemonize(cmd.foreground))
		goto out_unmount;
	if (!cmd.foreground && !to_file && mb_log_syslog_available())
		mb_log_use_syslog(1);
	if (new_client(fs, key, &fs->client))
		goto out_unmount;
	if (fuse_set_signal_handlers(se))
		goto out_unmount;
	if (mbfs_watch_start(fs->mountpoint))
		mb_log(MB_LOG_DEBUG, "cannot watch '%s' for unmounts", fs->mountpoint);
	ret = cmd.singlethread ? fuse_session_loop(se) : loop_mt(se, &cmd);
	/* a loop ended by SIGTERM/SIGINT/SIGHUP is a normal unmount */
	ret = (ret == 0 || ret == SIGTERM || ret == SIGINT || ret == SIGHUP) ? 0 : 1;
	mbfs_kcache_stop(fs->kcache);   /* it writes to the device */
	mbfs_watch_stop();
	fuse_remove_signal_handlers(se);
out_unmount:
	unmount_quietly(se);
out_destroy:
	mbfs_ll_destroy(se);
out:
	free(cmd.mountpoint);
	return ret;
}

static void fs_free(struct mbfs *fs)
{
	mbfs_wbq_free(fs->wbq);
	mbfs_newdirs_free(fs->newdirs);
	mbfs_gone_free(fs->gone);
	mbfs_node_free_all(fs);
	mbfs_nodeset_fini(fs->nodes);
	free(fs->nodes);
	mbfs_batch_free(fs->batch);
	mbfs_cache_free(fs->cache);
	mbfs_kcache_free(fs->kcache);
	mbfs_inos_free(fs->inos);
	mbfs_hidden_free(fs->hidden);
	mbfs_warm_free(fs->warm);
	mbfs_prefetch_free(fs->prefetch);
	mbfs_relist_free(fs->relist);
	mbfs_data_free(fs->data);
	mbfs_journal_close(fs->journal);
	if (fs->client)
		mb_client_free(fs->client);
	pthread_mutex_destroy(&fs->nodes_lock);
	mbfs_unsent_release(fs);
	free(fs->control_json);
	free(fs);
}

/* Close what the caller left open besides stdin, stdout and stderr: a
 * daemon that keeps a caller's pipe holds its reader until the unmount
 * (`{ mbfs ID DIR 9>&1; } | cat` never ended). A mountpoint given as
 * /dev/fd/N (mount.fuse3's drop_privileges) is kept. */
static void close_inherited(int argc, char **argv)
{
	int keep = -1;
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "/dev/fd/", 8) == 0)
			keep = atoi(argv[i] + 8);
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	close_range(keep >= 3 ? (unsigned)keep + 1 : 3, ~0u, 0);
}

/* Every file open on the mount, and every small file queued for
 * write-back, holds its working copy open: a cp -r of thousands of files
 * holds thousands at once, past the common soft limit of 1024 (creates
 * then fail with EMFILE). The soft limit goes up to the hard one, as
 * servers do. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		mb_log(MB_LOG_WARN, "cannot raise the limit of open files from "
		       "%llu: %s", (unsigned long long)was, strerror(errno));
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_state ps;
	struct mbfs_opts *o = &ps.o;
	char *key = NULL;
	int ret = 1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--status") == 0)
			return mbfs_status_main(argc, argv);
		if (strcmp(argv[i], "-u") == 0 || strcmp(argv[i], "--unmount") == 0)
			return mbfs_umount_main(argc, argv);
		if (strcmp(argv[i], "--list") == 0)
			return mbfs_list_main(argc, argv);
		if (strcmp(argv[i], "--stop") == 0)
			return mbfs_stop_main(argc, argv);
	}
	close_inherited(argc, argv);
	memset(&ps, 0, sizeof(ps));
	mb_log_init("mbfs", MB_LOG_INFO);
	fuse_set_log_func(fuse_log_to_mb);
	raise_fd_limit();
	struct mbfs *fs = calloc(1, sizeof(*fs));
	if (fs)
		fs->nodes = calloc(1, sizeof(*fs->nodes));
	if (!fs || !fs->nodes || mbfs_nodeset_init(fs->nodes)) {
		if (fs)
			free(fs->nodes);
		free(fs);
		return fail("out of memory");
	}
	pthread_mutex_init(&fs->nodes_lock, NULL);
	mbfs_fs = fs;
	if (fuse_opt_parse(&args, &ps, mbfs_opt_spec, opt_proc)) {
		fail("invalid arguments (see mbfs --help)");
		goto out;
	}
	if (o->show_help) {
		mbfs_usage(stdout);
		mbfs_fuse_help(stdout);
		ret = 0;
		goto out;
	}
	if (o->verbose >= 2)
		mb_log_set_level(MB_LOG_DEBUG);
	if (o->show_version) {
		printf("mbfs %s (libfuse %s)\n", MB_VERSION, fuse_pkgversion());
		ret = 0;
		goto out;
	}
	if (mb_api_global_init()) {
		fail("cannot initialise libcurl");
		goto out;
	}
	char fsname[64];
	struct log_target lt = { .asked = false };
	if (validate(fs, o, &ps, &lt, &key) || check_fuse_options(&args) ||
	    prepare(fs, o, key, &lt))
		goto out_global;
	snprintf(fsname, sizeof(fsname), "-ofsname=mbfs:%s", fs->ident.id);
	if (fuse_opt_add_arg(&args, fs->mountpoint) ||
	    fuse_opt_add_arg(&args, "-osubtype=mbfs") ||
	    /* the kernel checks mode bits against the owner shown (the
	     * mounting user, or -o uid/gid): without it, -o allow_other
	     * would let every local user in */
	    fuse_opt_add_arg(&args, "-odefault_permissions") ||
	    fuse_opt_add_arg(&args, fsname))
		goto out_global;
	ret = run_session(fs, &args, key, &lt);
out_global:
	if (ret && created_unmounted)
		fail("the new sandbox %s@%s keeps running, unmounted: mount it "
		     "with 'mbfs %s@%s %s', or stop it with 'mbfs --stop %s@%s'",
		     fs->ident.id, fs->ident.created_at, fs->ident.id,
		     fs->ident.created_at, fs->mountpoint, fs->ident.id,
		     fs->ident.created_at);
	mb_api_global_cleanup();
out:
	mb_cred_free_key(key);
	char **strs[] = { &o->api_url, &o->key_file, &o->cache_dir,
			  &o->log_file,
			  &o->attr_timeout, &o->dir_timeout, &o->op_timeout,
			  &o->keepalive,
			  &o->negative_timeout, &o->uid, &o->gid, &o->catalog,
			  &o->size, &o->bulk_read, &o->profile };
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(*strs[i]);
	for (int i = 0; i < ps.nnonopt; i++)
		free(ps.nonopt[i]);
	fuse_opt_free_args(&args);
	fs_free(fs);
	return ret;
}
