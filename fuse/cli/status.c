/* status.c: `mbfs --status` (see status.h): the control file's facts,
 * read once into struct facts and printed from there, for a person or as
 * JSON; --wait (status_wait.c) in between. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ident.h"
#include "fuse/cli/status.h"
#include "fuse/cli/status_int.h"
#include "fuse/outbox/unsent.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "mbfs: %s\nusage: mbfs --status [--wait] [--json] MOUNTPOINT\n",
		msg);
	return 2;
}


static const char *plural(double n, const char *one, const char *more)
{
	return n == 1 ? one : more;
}

/* The one sentence for a generation that is gone, into out. */
static void stopped_text(const struct mbfs_status *f, char *out, size_t n)
{
	int nk = f->kept ? cJSON_GetArraySize(f->kept) : 0;
	snprintf(out, n, "the sandbox '%s' generation %s is no longer running; "
		 "nothing more can be sent; %d file%s kept in %s", f->id,
		 f->created_at, nk, nk == 1 ? "" : "s",
		 f->kept_dir[0] ? f->kept_dir : "the cache directory's kept/");
}

static void print_pending(const struct mbfs_status *f)
{
	char b[64], u[64], t[64];
	double pf = f->pending_files, pd = f->pending_dirs;
	mbfs_status_human(f->pending_bytes, b, sizeof(b));
	if (pd > 0)
		printf("pending: %.0f file%s and %.0f new director%s, %s not on "
		       "the sandbox yet\n", pf, plural(pf, "", "s"), pd,
		       plural(pd, "y", "ies"), b);
	else
		printf("pending: %.0f file%s, %s not on the sandbox yet\n", pf,
		       plural(pf, "", "s"), b);
	if (f->pending_removes > 0)
		printf("         and %.0f removal%s, rename%s or mode change%s\n",
		       f->pending_removes, plural(f->pending_removes, "", "s"),
		       plural(f->pending_removes, "", "s"),
		       plural(f->pending_removes, "", "s"));
	if (f->uploading_files > 0) {
		mbfs_status_human(f->uploading_sent, u, sizeof(u));
		mbfs_status_human(f->uploading_bytes, t, sizeof(t));
		printf("         of which %.0f uploading on %s own: %s of %s "
		       "sent\n", f->uploading_files,
		       plural(f->uploading_files, "its", "their"), u, t);
	}
}

static void print_text(const struct mbfs_status *f)
{
	char b[64], why[1024];
	printf("mount:   %s@%s:%s on %s (pid %.0f)\n", f->id, f->created_at,
	       f->root, f->mountpoint, f->pid);
	if (f->stopped) {
		stopped_text(f, why, sizeof(why));
		printf("stopped: %s\n", why);
	}
	if (f->reported) {
		print_pending(f);
		if (f->waiting)
			printf("waiting: the sandbox cannot be reached (%s); "
			       "the pending changes go when it answers\n",
			       f->last_error);
		mbfs_status_human(f->sent_bytes, b, sizeof(b));
		printf("sent:    %.0f file%s in %.0f batch%s (%s)\n",
		       f->sent_files, plural(f->sent_files, "", "s"),
		       f->sent_batches, plural(f->sent_batches, "", "es"), b);
		if (f->failed_files > 0)
			printf("failed:  %.0f file%s (last: %s)\n", f->failed_files,
			       plural(f->failed_files, "", "s"), f->last_error);
		else if (!f->stopped)
			printf("failed:  none\n");
	} else {
		printf("pending: unknown (this mount does not report it)\n");
	}
	int nk = f->kept ? cJSON_GetArraySize(f->kept) : 0;
	if (nk)
		printf("kept:    %d file%s that could not be uploaded, data in:\n",
		       nk, nk == 1 ? "" : "s");
	for (int i = 0; i < nk; i++) {
		const cJSON *k = cJSON_GetArrayItem(f->kept, i);
		printf("  %s\n    -> %s\n    (%s)\n", mbfs_status_str(k, "path"), mbfs_status_str(k, "file"),
		       mbfs_status_str(k, "reason"));
	}
	if (f->unsent) {
		printf("before:  ");
		mbfs_unsent_print(stdout, f->unsent, "", true);
		printf("  this mount sent what stayed in the journal when it "
		       "started, or kept it (listed under kept)\n");
	}
	if (f->log_file[0])
		printf("log:     %s\n", f->log_file);
	else
		printf("log:     on the standard error of process %.0f (mounted "
		       "with -f or -d)\n", f->pid);
}

static void add_num(cJSON *o, const char *name, bool known, double v)
{
	if (known)
		cJSON_AddNumberToObject(o, name, v);
	else
		cJSON_AddNullToObject(o, name);
}

static void add_str(cJSON *o, const char *name, const char *v)
{
	if (v[0])
		cJSON_AddStringToObject(o, name, v);
	else
		cJSON_AddNullToObject(o, name);
}

/* The facts print_text shows, one JSON object on one line; error: why the
 * exit status is 1, or NULL. */
static void print_json(const struct mbfs_status *f, const char *error)
{
	cJSON *o = cJSON_CreateObject();
	bool r = f->reported;
	cJSON_AddStringToObject(o, "id", f->id);
	cJSON_AddStringToObject(o, "createdAt", f->created_at);
	cJSON_AddStringToObject(o, "root", f->root);
	cJSON_AddStringToObject(o, "mountpoint", f->mountpoint);
	cJSON_AddNumberToObject(o, "pid", f->pid);
	cJSON_AddBoolToObject(o, "stopped", f->stopped);
	add_num(o, "pendingFiles", r, f->pending_files);
	add_num(o, "pendingDirs", r, f->pending_dirs);
	add_num(o, "pendingRemoves", r, f->pending_removes);
	add_num(o, "pendingBytes", r, f->pending_bytes);
	add_num(o, "uploadingFiles", r, f->uploading_files);
	add_num(o, "uploadingBytes", r, f->uploading_bytes);
	add_num(o, "uploadingSentBytes", r, f->uploading_sent);
	add_num(o, "sentFiles", r, f->sent_files);
	add_num(o, "sentBatches", r, f->sent_batches);
	add_num(o, "sentBytes", r, f->sent_bytes);
	add_num(o, "failedFiles", r, f->failed_files);
	if (r)
		cJSON_AddBoolToObject(o, "waiting", f->waiting);
	add_str(o, "lastError", f->last_error);
	cJSON *kept = f->kept ? cJSON_Duplicate(f->kept, true)
			      : cJSON_CreateArray();
	cJSON_AddItemToObject(o, "kept", kept);
	add_str(o, "keptDir", f->kept_dir);
	if (f->unsent)
		cJSON_AddItemToObject(o, "unsent", cJSON_Duplicate(f->unsent, true));
	add_str(o, "logFile", f->log_file);
	add_str(o, "error", error ? error : "");
	char *t = cJSON_PrintUnformatted(o);
	if (t)
		printf("%s\n", t);
	else
		fprintf(stderr, "mbfs: cannot print the status: out of memory\n");
	free(t);
	cJSON_Delete(o);
}

/* The message once, on stderr; with --json also as the "error" of an
 * object on stdout, as mbexec --json does, so that a script reads why. */
static int not_a_mount(const char *mnt, int rc, bool json)
{
	char msg[512];
	struct stat st;
	if (rc == -EINVAL)
		snprintf(msg, sizeof(msg), "cannot read the status of '%s'", mnt);
	else if (stat(mnt, &st) != 0)
		snprintf(msg, sizeof(msg), "cannot use '%s': %s", mnt,
			 strerror(errno));
	else
		snprintf(msg, sizeof(msg), "'%s' is not an mbfs mount (or not "
			 "yours)", mnt);
	fprintf(stderr, "mbfs: %s\n", msg);
	if (json) {
		cJSON *o = cJSON_CreateObject();
		add_str(o, "mountpoint", mnt);
		add_str(o, "error", msg);
		char *t = cJSON_PrintUnformatted(o);
		if (t)
			printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
	}
	return 2;
}

/* Print the facts; the exit status: 1 when the generation is gone or
 * failed (the wait saw a failure), else 0. */
static int report(const struct mbfs_status *f, bool json, bool failed)
{
	char why[1024];
	const char *error = NULL;
	if (f->stopped) {
		stopped_text(f, why, sizeof(why));
		error = why;
	} else if (failed) {
		error = "some files could not be uploaded: see 'failed' and "
			"'kept', and the mount's log";
	}
	if (json)
		print_json(f, error);
	else
		print_text(f);
	if (!json && failed && !f->stopped)
		printf("%s\n", error);
	fflush(stdout);
	return error ? 1 : 0;
}

int mbfs_status_main(int argc, char **argv)
{
	const char *mnt = NULL;
	bool wait = false, json = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--status") == 0)
			continue;
		if (strcmp(argv[i], "--wait") == 0)
			wait = true;
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			i++;   /* the mount knows its service: nothing to choose */
		else if (strncmp(argv[i], "--profile=", 10) == 0)
			continue;
		else if (argv[i][0] == '-') {
			char msg[300];
			snprintf(msg, sizeof(msg), "unknown option '%.200s' with "
				 "--status", argv[i]);
			return usage_error(msg);
		}
		else if (mnt)
			return usage_error("too many arguments");
		else
			mnt = argv[i];
	}
	if (!mnt)
		return usage_error("missing MOUNTPOINT");
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", strcmp(mnt, "/") ? mnt : "",
		     MB_CONTROL_NAME) >= (int)sizeof(path))
		return usage_error("MOUNTPOINT too long");
	struct mbfs_status f;
	cJSON *doc = NULL;
	int rc = mbfs_status_facts(path, &doc, &f);
	int urc = rc ? mbfs_status_unsent(mnt, json) : -1;
	if (urc >= 0)
		return urc;   /* no mount, but an ended mount's record */
	if (rc)
		return not_a_mount(mnt, rc, json);
	bool failed = false;
	/* a generation that is gone takes nothing more: no wait */
	if (wait && !f.stopped) {
		cJSON_Delete(doc);
		doc = NULL;
		rc = mbfs_status_wait(path, mnt);
		if (rc == 2)
			return 2;
		failed = rc == 1;
		rc = mbfs_status_facts(path, &doc, &f);
		if (rc)
			return not_a_mount(mnt, rc, json);
	}
	rc = report(&f, json, failed);
	cJSON_Delete(doc);
	return rc;
}
