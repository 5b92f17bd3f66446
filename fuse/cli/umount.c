/* umount.c: `mbfs -u [--timeout T] MOUNTPOINT` (umount.h). Talks to the
 * mount through its control file only: a child writes "sync" (which
 * returns once what was queued is sent, or a try could not reach the
 * sandbox) while this one reads the control file every PROGRESS_MS, for
 * the progress line on a terminal and to see whether the daemon is still
 * retrying; then fusermount3 -u, and a wait for the daemon's exit, whose
 * last word is its unsent record (unsent.h).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/util.h"
#include "fuse/cli/status_int.h"
#include "fuse/cli/umount.h"
#include "fuse/outbox/unsent.h"

#define PROGRESS_MS 250
#define DEFAULT_WAIT_MS 60000   /* when the mount does not say op_timeout */
#define UMOUNT_TRIES 20         /* fusermount3 -u, PROGRESS_MS apart */

extern char **environ;

static int usage_error(const char *msg)
{
	fprintf(stderr, "mbfs: %s\nusage: mbfs -u [--timeout T] MOUNTPOINT\n",
		msg);
	return 2;
}

/* The sync runs in a child process: once the write is in the daemon's
 * hands the kernel waits for its answer even through SIGKILL, so a
 * thread of ours would hold our exit until the daemon's try ends
 * (op_timeout), long after we gave up. A child is left to that wait. */
struct sync_call {
	int fd;          /* the control file, open for writing */
	int done[2];     /* a pipe: written once the write returned */
	pid_t pid;
	bool running;
};

static int sync_start(struct sync_call *s)
{
	s->pid = fork();
	if (s->pid < 0)
		return -EAGAIN;
	if (s->pid == 0) {
		/* nor does it hold our caller's pipes open after we exit */
		int nul = open("/dev/null", O_RDWR);
		for (int fd = 0; nul >= 0 && fd <= 2; fd++)
			dup2(nul, fd);
		ssize_t w;
		do
			w = write(s->fd, MB_CONTROL_SYNC, strlen(MB_CONTROL_SYNC));
		while (w < 0 && errno == EINTR);
		/* EIO says a failure or a sandbox that does not answer: the
		 * control file says which, and that is what is read next */
		_exit(write(s->done[1], "", 1) == 1 ? 0 : 1);
	}
	s->running = true;
	return 0;
}

/* Has the sync returned? Waits up to ms for it. */
static bool sync_returned(struct sync_call *s, int ms)
{
	struct pollfd p = { .fd = s->done[0], .events = POLLIN };
	if (!s->running) {
		poll(NULL, 0, ms);
		return false;
	}
	if (poll(&p, 1, ms) <= 0)
		return false;
	char c;
	if (read(s->done[0], &c, 1) < 0) {
		/* readable: it returned */
	}
	while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
		;
	s->running = false;
	return true;
}

static double pending_of(const struct mbfs_status *f)
{
	return f->pending_files + f->pending_dirs;
}

/* The progress line, over the one before (width: the longest so far). */
static void progress(const struct mbfs_status *f, int *width)
{
	char b[64], line[512];
	mbfs_status_human(f->pending_bytes, b, sizeof(b));
	int n = snprintf(line, sizeof(line), "unmount: %.0f file%s, %s left to "
			 "send%s%.300s", f->pending_files,
			 f->pending_files == 1 ? "" : "s", b,
			 f->waiting ? "; waiting for the sandbox: " : "",
			 f->waiting ? f->last_error : "");
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (n > *width)
		*width = n;
	fprintf(stderr, "\r%-*s", *width, line);
	fflush(stderr);
}

static void progress_clear(int width)
{
	if (width)
		fprintf(stderr, "\r%*s\r", width, "");
}

/* Not unmounted: what is still pending, and that nothing is lost. */
static void say_pending(const char *mnt, const struct mbfs_status *f,
			const cJSON *doc, uint64_t waited_ms)
{
	char b[64], what[96];
	double nf = f->pending_files, nd = f->pending_dirs;
	mbfs_status_human(f->pending_bytes, b, sizeof(b));
	if (nd > 0)
		snprintf(what, sizeof(what), "%.0f file%s and %.0f new "
			 "director%s", nf, nf == 1 ? "" : "s", nd,
			 nd == 1 ? "y" : "ies");
	else
		snprintf(what, sizeof(what), "%.0f file%s", nf, nf == 1 ? "" : "s");
	fprintf(stderr, "mbfs: '%s' is still mounted: %s (%s) not on the "
		"sandbox yet, which has not answered for %llus (%s)\n", mnt,
		what, b, (unsigned long long)(waited_ms / 1000),
		f->last_error[0] ? f->last_error : "no answer");
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "pendingPaths");
	int np = cJSON_IsArray(paths) ? cJSON_GetArraySize(paths) : 0;
	for (int i = 0; i < np; i++) {
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
		fprintf(stderr, "  %s%s\n", strcmp(mnt, "/") ? mnt : "", p ? p : "?");
	}
	if (pending_of(f) > np)
		fprintf(stderr, "  and %.0f more\n", pending_of(f) - np);
	fprintf(stderr, "mbfs: nothing is lost: the mount keeps them and retries; "
		"run 'mbfs -u %s' again once the sandbox answers\n", mnt);
}

/* What this mount kept, from its control file. */
static void say_kept(const struct mbfs_status *f)
{
	int nk = f->kept ? cJSON_GetArraySize(f->kept) : 0;
	if (f->failed_files > 0 && !nk)
		fprintf(stderr, "mbfs: %.0f file%s could not be sent (last: %s)\n",
			f->failed_files, f->failed_files == 1 ? "" : "s",
			f->last_error);
	if (nk)
		fprintf(stderr, "mbfs: %d file%s could not be uploaded; data "
			"kept in:\n", nk, nk == 1 ? "" : "s");
	mbfs_unsent_print_kept(stderr, f->kept, "", f->kept_dir);
}

/* fusermount3 -u mnt: its exit status, or -1 when it cannot run. */
static int fusermount_once(const char *mnt, bool quiet)
{
	char *argv[] = { (char *)"fusermount3", (char *)"-u", (char *)mnt, NULL };
	posix_spawn_file_actions_t fa;
	if (posix_spawn_file_actions_init(&fa))
		return -1;
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
						 O_WRONLY, 0);
	pid_t pid;
	int src = posix_spawnp(&pid, "fusermount3", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (src)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* fusermount3 -u, tried again for a few seconds while it fails: what
 * holds the mount a moment longer (the sync of an earlier mbfs -u that
 * gave up, still in the daemon's hands until its try ends) lets go.
 * Only the last try speaks. */
static int fusermount_u(const char *mnt)
{
	int rc = -1;
	for (int i = 0; i < UMOUNT_TRIES - 1 && rc; i++) {
		rc = fusermount_once(mnt, true);
		if (rc)
			poll(NULL, 0, PROGRESS_MS);
	}
	return rc ? fusermount_once(mnt, false) : 0;
}

/* Wait up to ms for process pid to end. true once it has (or is not
 * there to ask). */
static bool wait_exit(pid_t pid, uint64_t ms)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0 && errno == ENOSYS) {
		/* before Linux 5.3: ask every PROGRESS_MS (not our child: no
		 * zombie to mistake for it) */
		for (uint64_t t = 0; t < ms; t += PROGRESS_MS) {
			if (kill(pid, 0) && errno == ESRCH)
				return true;
			poll(NULL, 0, PROGRESS_MS);
		}
		return false;
	}
	if (fd < 0)
		return errno == ESRCH;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;
	do
		r = poll(&p, 1, (int)ms);
	while (r < 0 && errno == EINTR);
	close(fd);
	return r > 0;
}

/* After the daemon ended: its record of what it did not send, printed
 * and removed (told now, not again at the next mount). The count of
 * files in it; -1 when there is none. */
static int final_record(const char *cache_dir)
{
	char path[4200];
	if (!cache_dir[0] || snprintf(path, sizeof(path), "%s/%s", cache_dir,
				      MBFS_UNSENT_NAME) >= (int)sizeof(path))
		return -1;
	char *text = mbfs_status_read(path);
	cJSON *rec = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!cJSON_IsObject(rec)) {
		cJSON_Delete(rec);
		return -1;
	}
	int n = mbfs_unsent_count(rec);
	fprintf(stderr, "mbfs: unmounted '%s', but not everything is on the "
		"sandbox:\n", mbfs_status_str(rec, "mountpoint"));
	mbfs_unsent_print(stderr, rec, "", false);
	cJSON_Delete(rec);
	unlink(path);
	return n;
}

struct args {
	const char *mnt;
	bool timeout_set;
	uint64_t timeout_ms;
};

static int parse(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		if (!strcmp(argv[i], "-u") || !strcmp(argv[i], "--unmount"))
			continue;
		if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			v = argv[++i];
		else if (!strncmp(argv[i], "--timeout=", 10))
			v = argv[i] + 10;
		else if (argv[i][0] == '-' && argv[i][1]) {
			char msg[300];
			snprintf(msg, sizeof(msg), "unknown option '%.200s' with -u",
				 argv[i]);
			return usage_error(msg);
		} else if (a->mnt) {
			return usage_error("too many arguments");
		} else {
			a->mnt = argv[i];
		}
		if (v && mb_parse_duration_ms(v, &a->timeout_ms)) {
			char msg[300];
			snprintf(msg, sizeof(msg), "invalid --timeout '%.200s': use "
				 "seconds, e.g. --timeout=60", v);
			return usage_error(msg);
		}
		if (v)
			a->timeout_set = true;
	}
	return a->mnt ? 0 : usage_error("missing MOUNTPOINT");
}

/* Send everything, waiting while the daemon retries. 0: nothing is
 * pending (f and *doc describe the end); 1: gave up (said); 2: the mount
 * cannot be asked (said). */
static int drain(const char *path, const char *mnt, const struct args *a,
		 struct mbfs_status *f, cJSON **doc)
{
	struct sync_call s = { .fd = open(path, O_WRONLY | O_CLOEXEC) };
	int rc = 2, width = 0;
	bool tty = isatty(STDERR_FILENO);
	if (s.fd < 0 || pipe2(s.done, O_CLOEXEC)) {
		fprintf(stderr, "mbfs: '%s' is not an mbfs mount (or not yours): "
			"%s\n", mnt, strerror(errno));
		if (s.fd >= 0)
			close(s.fd);
		return 2;
	}
	uint64_t bound = a->timeout_ms, waiting_since = 0;
	if (!a->timeout_set) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(*doc, "opTimeoutMs");
		bound = cJSON_IsNumber(t) && t->valuedouble >= 1000
			? (uint64_t)t->valuedouble : DEFAULT_WAIT_MS;
	}
	bool returned = false;
	if (sync_start(&s))
		goto out;
	for (;;) {
		returned = sync_returned(&s, PROGRESS_MS) || returned;
		cJSON_Delete(*doc);
		*doc = NULL;
		int frc = mbfs_status_facts(path, doc, f);
		if (frc) {
			progress_clear(width);
			fprintf(stderr, "mbfs: '%s' stopped answering: %s\n", mnt,
				strerror(-frc));
			break;
		}
		uint64_t now = mb_now_ms();
		double left = pending_of(f) + f->uploading_files;
		if (tty && left > 0)
			progress(f, &width);
		if (returned && (left == 0 || f->stopped)) {
			progress_clear(width);
			rc = 0;   /* sent, kept, or never to be sent: said next */
			break;
		}
		/* the daemon retries on its own, backing off: a sync now would
		 * only make it try at once */
		waiting_since = f->waiting ? (waiting_since ? waiting_since : now) : 0;
		/* no answer: since the queue found the sandbox out of reach,
		 * or as long as the batch in flight has waited for its answer
		 * (a frozen service holds it for op_timeout before that) */
		uint64_t quiet = waiting_since ? now - waiting_since : 0;
		if (f->inflight_ms > (double)quiet)
			quiet = (uint64_t)f->inflight_ms;
		if (quiet >= bound) {
			progress_clear(width);
			say_pending(mnt, f, *doc, quiet);
			rc = 1;
			break;
		}
		if (returned && !s.running && !f->waiting) {
			/* connected again, or written to meanwhile: push it */
			returned = false;
			if (sync_start(&s))
				break;
		}
	}
out:
	/* a sync still blocked (a try that has not timed out) is left to
	 * its child, which ends when the daemon's try does */
	close(s.done[0]);
	close(s.done[1]);
	close(s.fd);
	return rc;
}

int mbfs_umount_main(int argc, char **argv)
{
	struct args a = { 0 };
	int rc = parse(argc, argv, &a);
	if (rc)
		return rc;
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", strcmp(a.mnt, "/") ? a.mnt : "",
		     MB_CONTROL_NAME) >= (int)sizeof(path))
		return usage_error("MOUNTPOINT too long");
	struct mbfs_status f;
	cJSON *doc = NULL;
	rc = mbfs_status_facts(path, &doc, &f);
	if (rc) {
		fprintf(stderr, "mbfs: '%s' is not an mbfs mount (or not yours): "
			"%s\n", a.mnt, strerror(rc == -EINVAL ? EINVAL : -rc));
		return 2;
	}
	rc = drain(path, a.mnt, &a, &f, &doc);
	if (rc) {
		cJSON_Delete(doc);
		return rc;
	}
	/* from here on the control file goes with the mount: copy what is
	 * needed after it */
	pid_t pid = (pid_t)f.pid;
	char cache_dir[4096];
	snprintf(cache_dir, sizeof(cache_dir), "%s",
		 mbfs_status_str(doc, "cacheDir"));
	bool failed = f.failed_files > 0 || (f.kept && cJSON_GetArraySize(f.kept));
	bool stopped = f.stopped;
	int fu = fusermount_u(a.mnt);
	if (fu != 0) {
		if (failed)
			say_kept(&f);
		fprintf(stderr, "mbfs: cannot unmount '%s' (%s)%s\n", a.mnt,
			fu < 0 ? "fusermount3 did not run" : "see fusermount3's message",
			failed ? "" : "; everything written is on the sandbox");
		cJSON_Delete(doc);
		return 1;
	}
	/* the daemon sends what was written since and writes its record */
	if (pid > 0 && !wait_exit(pid, DEFAULT_WAIT_MS * 2)) {
		fprintf(stderr, "mbfs: '%s' is unmounted, but its daemon (pid %ld) "
			"has not ended; its log says why\n", a.mnt, (long)pid);
		cJSON_Delete(doc);
		return 1;
	}
	int left = final_record(cache_dir);
	if (left < 0 && failed)
		say_kept(&f);   /* no record to tell it: the control file's */
	if (stopped)
		fprintf(stderr, "mbfs: the sandbox '%s' generation %s is no longer "
			"running: nothing more could be sent\n", f.id, f.created_at);
	cJSON_Delete(doc);
	return left > 0 || failed || stopped ? 1 : 0;
}
