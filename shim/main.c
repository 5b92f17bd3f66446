/* main.c: mbexec: run a command in a Mainbrella sandbox as if locally.
 *
 * Options (options.c), sandbox and directory (locate.c), credentials, then
 * one strategy (strategy.h) between the signal thread's start and stop.
 * Exit status: the command's; 124 timeout; 125 usage/configuration (nothing
 * sent); 255 transport/API/quota. The only place that exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/api.h"
#include "common/config.h"
#include "common/cred.h"
#include "common/log.h"
#include "common/util.h"
#include "shim/mbexec.h"
#include "shim/pump.h"
#include "shim/result.h"
#include "shim/strategy.h"

/* Shell builtins with no program of the same name: `exec` cannot run them. */
static bool shell_only(const char *name)
{
	static const char *const names[] = {
		".", ":", "alias", "bg", "break", "cd", "command", "continue",
		"eval", "exec", "exit", "export", "fg", "getopts", "hash", "jobs",
		"local", "read", "readonly", "return", "set", "shift", "source",
		"times", "trap", "type", "ulimit", "umask", "unalias", "unset",
		"wait",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* `mbexec bash` from a terminal: without -t or -i a terminal's input is
 * not forwarded, so an interactive program reads EOF and ends at once with
 * status 0. Say why, once, when the command is a known one run bare; the
 * command still runs as asked (docker exec does not add -t either). */
static void hint_tty(const struct mbx_opts *o)
{
	static const char *const names[] = {
		"bash", "sh", "zsh", "dash", "ksh", "fish", "ash", "csh", "tcsh",
		"python", "python3", "ipython", "node", "irb", "ruby", "lua",
		"ghci", "psql", "mysql", "sqlite3", "redis-cli", "R",
	};
	const char *base;
	size_t i;

	if (o->sh || o->argc != 1 || o->tty != -1 || o->interactive ||
	    o->no_stdin || o->attach || !isatty(0))
		return;
	base = strrchr(o->argv[0], '/');
	base = base ? base + 1 : o->argv[0];
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(base, names[i])) {
			mbx_note("'%s' reads a terminal, whose input mbexec "
				 "forwards only with -t: use 'mbexec -t %s'",
				 o->argv[0], o->argv[0]);
			return;
		}
}

/* The text /bin/sh -c runs: exports, then the script or the quoted argv.
 * With use_exec an argv replaces the shell (as when run without one: no
 * "Killed" notice from a shell in between, the status is the program's). */
static char *build_script(const struct mbx_opts *o, bool use_exec)
{
	struct mb_buf b;
	const char *eq;
	size_t i;
	int r = 0;

	mb_buf_init(&b, 4u << 20);
	for (i = 0; !r && i < o->nenv; i++) {
		eq = strchr(o->env[i], '=');
		r = mb_buf_appendf(&b, "export %.*s=", (int)(eq - o->env[i]), o->env[i]);
		r = r ? r : mb_buf_append_shq(&b, eq + 1);
		r = r ? r : mb_buf_appends(&b, "\n");
	}
	if (o->sh) {
		r = r ? r : mb_buf_appends(&b, o->sh);
	} else {
		if (use_exec && !shell_only(o->argv[0]))
			r = r ? r : mb_buf_appends(&b, "exec ");
		for (i = 0; !r && i < (size_t)o->argc; i++) {
			r = i ? mb_buf_appends(&b, " ") : 0;
			r = r ? r : mb_buf_append_shq(&b, o->argv[i]);
		}
	}
	if (r) {
		mb_buf_release(&b);
		return NULL;
	}
	return mb_buf_detach(&b, NULL);
}

/* Strip trailing slashes for comparing URLs. */
static size_t url_len(const char *u)
{
	size_t n = strlen(u);

	while (n && u[n - 1] == '/')
		n--;
	return n;
}

/* The API URL is the mount's; $MAINBRELLA_API_URL may not say otherwise. */
static int resolve_url(const struct mbx_target *t, char **url)
{
	const char *env = getenv("MAINBRELLA_API_URL");
	const char *mine = t->control.api_url;
	struct mb_err err;

	if (env && *env && (url_len(env) != url_len(mine) ||
			    strncasecmp(env, mine, url_len(mine)))) {
		mbx_error("MAINBRELLA_API_URL is '%s' but the mount in '%s' uses "
			  "'%s'; unset it or use a mount of that service",
			  env, t->mount_dir, mine);
		return MBX_EXIT_USAGE;
	}
	mb_err_clear(&err);
	if (mb_cred_api_url(mine, url, &err)) {
		mbx_error("the mount's API URL is unusable: %s", err.msg);
		return MBX_EXIT_USAGE;
	}
	return 0;
}

/* The profile asked for (--profile, $MAINBRELLA_PROFILE), else the one of
 * the mount's URL; a profile that names a URL must name the mount's. */
static int resolve_profile(const struct mbx_opts *o,
			   const struct mbx_target *t, struct mb_profile *p)
{
	const char *mine = t->control.api_url;
	struct mb_err err;

	mb_err_clear(&err);
	if (mb_config_select(o->profile, mine, p, &err)) {
		mbx_error("%s", err.msg);
		return MBX_EXIT_USAGE;
	}
	if (p->name[0] && p->url[0] && !mb_config_same_url(p->url, mine)) {
		mbx_error("profile '%s' is for '%s' (%s) but the mount in '%s' "
			  "uses '%s'; use that service's profile", p->name,
			  p->url, p->url_at, t->mount_dir, mine);
		return MBX_EXIT_USAGE;
	}
	return 0;
}

static bool stdin_forwardable(void)
{
	struct stat s;

	if (fstat(0, &s))
		return false;
	return S_ISFIFO(s.st_mode) || S_ISREG(s.st_mode) || S_ISSOCK(s.st_mode);
}

/* A closed fd 0, 1 or 2 would be reused by the next open() (a socket, the
 * control file) and then read or written as if it were stdio. */
static void fill_std_fds(void)
{
	int fd, n;

	for (fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
		if (n >= 0 && n != fd) {
			dup2(n, fd);
			close(n);
		}
	}
}

/* The TERM a -t session gets, as ssh's pty request carries it: the local
 * one, or none when it is unset or empty (the sandbox's default then). A
 * value no terminfo name comes near is not passed. */
static const char *pty_term(void)
{
	const char *t = getenv("TERM");

	if (!t || !*t)
		return NULL;
	if (strlen(t) > MBX_TERM_MAX) {
		mb_log(MB_LOG_WARN, "TERM is longer than %d bytes; not passed on",
		       MBX_TERM_MAX);
		return NULL;
	}
	return t;
}

/* Exit status once the strategy has finished. */
static int final_status(const struct mbx_run *r)
{
	int by;

	if (r->timed_out)
		return MBX_EXIT_TIMEOUT;
	pthread_mutex_lock((pthread_mutex_t *)&r->lock);
	by = r->terminated_by;
	pthread_mutex_unlock((pthread_mutex_t *)&r->lock);
	if (by)
		return 128 + by;
	return r->status;
}

/* The sandbox ends at its hard deadline whatever it is doing (activity
 * never moves it): say so once when a command starts within 10 minutes of
 * it. The mount wrote the deadline into its control file, so this costs no
 * request. */
static void warn_deadline(const struct mbx_target *t)
{
	time_t end, now = time(NULL);
	char when[16];
	struct tm tm;

	if (!t->control.expires_at[0] ||
	    mb_parse_iso8601(t->control.expires_at, &end, NULL) || end <= now ||
	    end - now > MBX_DEADLINE_WARN_S)
		return;
	localtime_r(&end, &tm);
	strftime(when, sizeof(when), "%H:%M", &tm);
	mbx_note("the sandbox %s@%s ends in %lld min (at %s, its hard deadline); "
		 "save your work elsewhere or start another with mbfs --create",
		 t->control.ident.id, t->control.ident.created_at,
		 (long long)(end - now + 59) / 60, when);
}

int main(int argc, char **argv)
{
	/* static: the signal thread may look at run until the process ends */
	static struct mbx_target target;
	static struct mbx_opts o;
	static struct mbx_run run;
	struct mb_client_opts copts;
	struct mb_profile prof;
	struct mb_err err;
	char *url = NULL, *key = NULL;
	bool ran = false, has_status = false;
	int code, signo;

	fill_std_fds();
	code = mbx_opts_parse(argc, argv, &o);
	if (code >= 0) {
		/* a script that asked for JSON gets it, with the usage error
		 * (when --json came before the word at fault) */
		if (code == MBX_EXIT_USAGE && o.json) {
			memset(&run, 0, sizeof(run));
			mbx_sink_init(&run.out, 1, true);
			mbx_sink_init(&run.err, 2, true);
			mbx_print_json(&run, "none", false, code, mbx_last_error());
			mbx_sink_release(&run.out);
			mbx_sink_release(&run.err);
		}
		mbx_opts_release(&o);
		return code;
	}
	mb_log_init(MBX_PROG, o.verbose >= 2 ? MB_LOG_DEBUG :
			      o.verbose ? MB_LOG_INFO : MB_LOG_WARN);

	memset(&run, 0, sizeof(run));
	pthread_mutex_init(&run.lock, NULL);
	run.opts = &o;
	run.target = &target;
	run.t0_ms = mb_now_ms();
	mbx_sink_init(&run.out, 1, o.json);
	mbx_sink_init(&run.err, 2, o.json);
	if (o.timeout_ms)
		run.deadline_ms = run.t0_ms + o.timeout_ms;

	/* configuration: nothing is sent before all of it is right */
	code = mbx_locate(&o, &target);
	if (code)
		goto out;
	hint_tty(&o);
	warn_deadline(&target);
	code = resolve_url(&target, &url);
	if (!code)
		code = resolve_profile(&o, &target, &prof);
	if (code)
		goto out;
	mb_err_clear(&err);
	if (mb_cred_load_key_for(o.key_file, &prof, &key, &err)) {
		mbx_error("%s", err.msg);   /* "no API key: ...", "key file ..." */
		code = MBX_EXIT_USAGE;
		goto out;
	}
	run.script = o.attach ? strdup("") : build_script(&o, false);
	run.script_exec = o.attach ? strdup("") : build_script(&o, true);
	run.attach_id = o.attach;
	if (!run.script || !run.script_exec) {
		mbx_error("the command is too long");
		code = MBX_EXIT_USAGE;
		goto out;
	}
	run.ident = target.control.ident;
	run.api_url = url;
	run.stdin_tty = isatty(0);
	run.pty = o.tty == 1;
	run.term = run.pty ? pty_term() : NULL;
	run.forward_stdin = !o.no_stdin && !o.attach &&
		(run.pty || o.interactive || (!run.stdin_tty && stdin_forwardable()));
	/* managed executions only when asked for: the exec strategy has a
	 * pty too (script(1) on the guest), and never meets the history limit */
	if (o.mode == MBX_MODE_MANAGED)
		run.strategy = &mbx_strategy_managed;
	else
		run.strategy = &mbx_strategy_exec;

	if (mb_api_global_init()) {
		mbx_error("cannot initialise libcurl");
		code = MBX_EXIT_FAIL;
		goto out;
	}
	memset(&copts, 0, sizeof(copts));
	copts.api_url = url;
	copts.api_key = key;
	copts.use_limiter = true;
	copts.log_requests = o.verbose > 0;
	mb_err_clear(&err);
	if (mb_client_new(&copts, &run.client, &err)) {
		mbx_error("%s", err.msg);
		code = MBX_EXIT_USAGE;
		goto out_global;
	}
	if (mbx_signals_start(&run)) {
		mbx_error("cannot start the signal thread");
		code = MBX_EXIT_FAIL;
		goto out_client;
	}
	mb_log(MB_LOG_INFO, "%s on %s@%s in %s", run.strategy->name, run.ident.id,
	       run.ident.created_at, target.remote_cwd);

	if (mbx_signals_early(&run, &signo) != MBX_ACT_NONE) {
		code = 128 + signo;   /* interrupted before anything was sent */
		goto out_signals;
	}
	int synced = mbx_sync_mount(&target);
	if (synced < 0) {
		mbx_error("the mount in '%s' could not upload pending changes (see "
			  "its log); the command did not start", target.mount_dir);
		code = MBX_EXIT_FAIL;
		goto out_signals;
	}
	/* a conflict keeps both versions: the command runs on the sandbox's */
	if (synced > 0)
		mbx_note("files changed both in '%s' and on the sandbox: the "
			 "sandbox keeps its version, the mount's is kept locally "
			 "('mbfs --status %s' lists them)", target.mount_dir,
			 target.mount_dir);
	mbx_warn_unsent(&target);
	ran = true;
	code = run.strategy->start(&run);
	if (code == 0) {
		code = run.strategy->wait(&run);
		if (code == 0) {
			has_status = true;
			code = final_status(&run);
		}
	}
out_signals:
	mbx_signals_stop(&run);
	run.end_ms = mb_now_ms();
	run.strategy->finish(&run);
	mbx_term_restore();
	/* given up on the service: the command may still run (an --attach
	 * invalidates at its end), and the mount, which waits for the same
	 * service, may not answer either */
	if (ran && !mb_api_cancelled())
		mbx_invalidate_mount(&target);
out_client:
	/* a thread still inside a request keeps the client until exit */
	if (!run.threads_left)
		mb_client_free(run.client);
out_global:
	if (!run.threads_left)
		mb_api_global_cleanup();
out:
	if (!run.end_ms)
		run.end_ms = mb_now_ms();
	if (o.json && mbx_print_json(&run, run.strategy ? run.strategy->name : "none",
				     has_status, code,
				     has_status ? NULL : mbx_last_error()))
		code = code ? code : MBX_EXIT_FAIL;
	mb_cred_free_key(key);
	free(url);
	free(run.script);
	free(run.script_exec);
	mbx_sink_release(&run.out);
	mbx_sink_release(&run.err);
	mbx_opts_release(&o);
	return code;
}
