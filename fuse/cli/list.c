/* list.c: `mbfs --list` and `mbfs --stop` (see list.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/api.h"
#include "common/config.h"
#include "common/cred.h"
#include "common/log.h"
#include "common/mountinfo.h"
#include "common/util.h"
#include "fuse/cli/list.h"
#include "fuse/cli/when.h"

#define LIST_USAGE "usage: mbfs --list [--json] [-v] [--profile NAME] [-o api_url=URL,key_file=FILE]\n"
#define STOP_USAGE "usage: mbfs --stop [--force] [-v] [--profile NAME] [-o api_url=URL,key_file=FILE] " \
		   "ID@GENERATION\n"

struct cli {
	const char *cmd;        /* "--list" or "--stop" */
	bool json, force;
	int verbose;
	char *api_url, *key_file;   /* from -o, malloc'd */
	char *profile;              /* --profile or -o profile=, malloc'd */
	const char *target;     /* --stop's ID@GENERATION */
};

/* What the command needs to talk to the service, and the local mounts. */
struct session {
	char *url;
	struct mb_client *client;
	struct mb_mount *mounts;
	size_t nmounts;
	bool curl;              /* mb_api_global_init done */
};

static int usage_error(const struct cli *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_error(const struct cli *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "mbfs: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", strcmp(o->cmd, "--list") ? STOP_USAGE : LIST_USAGE);
	return 2;
}

/* -o api_url=URL,key_file=FILE: the only -o options that mean something
 * without a mount. */
static int parse_o(struct cli *o, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;
	if (!copy)
		return usage_error(o, "out of memory");
	for (char *w = strtok_r(copy, ",", &save); w && !rc;
	     w = strtok_r(NULL, ",", &save)) {
		char **dst = strncmp(w, "api_url=", 8) == 0 ? &o->api_url
			: strncmp(w, "key_file=", 9) == 0 ? &o->key_file
			: strncmp(w, "profile=", 8) == 0 ? &o->profile : NULL;
		if (!dst) {
			rc = usage_error(o, "option '-o %s' does not go with this "
					 "command", w);
			break;
		}
		free(*dst);
		*dst = strdup(strchr(w, '=') + 1);
		if (!*dst)
			rc = usage_error(o, "out of memory");
	}
	free(copy);
	return rc;
}

static int set_profile(struct cli *o, const char *name)
{
	free(o->profile);
	o->profile = strdup(name);
	return o->profile ? 0 : usage_error(o, "out of memory");
}

static int parse_args(struct cli *o, const char *cmd, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->cmd = cmd;
	bool stop = strcmp(cmd, "--stop") == 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int rc = 0;
		if (strcmp(a, cmd) == 0)
			continue;
		if (!stop && strcmp(a, "--json") == 0)
			o->json = true;
		else if (stop && strcmp(a, "--force") == 0)
			o->force = true;
		else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
			o->verbose++;
		else if (strcmp(a, "--profile") == 0 && i + 1 < argc)
			rc = set_profile(o, argv[++i]);
		else if (strncmp(a, "--profile=", 10) == 0)
			rc = set_profile(o, a + 10);
		else if (strcmp(a, "-o") == 0 && i + 1 < argc)
			rc = parse_o(o, argv[++i]);
		else if (strncmp(a, "-o", 2) == 0 && a[2])
			rc = parse_o(o, a + 2);
		else if (a[0] == '-')
			rc = usage_error(o, stop ? "unknown option '%s' with --stop"
					 : "unknown option '%s' with --list", a);
		else if (stop && !o->target)
			o->target = a;
		else
			rc = usage_error(o, "unexpected argument '%s'", a);
		if (rc)
			return rc;
	}
	if (stop && !o->target)
		return usage_error(o, "missing ID@GENERATION (see mbfs --list)");
	return 0;
}

static void cli_release(struct cli *o)
{
	free(o->api_url);
	free(o->key_file);
	free(o->profile);
}

/* The API client and the local mounts. 0, or 1 with the message printed. */
static int session_open(struct session *s, const struct cli *o)
{
	struct mb_err err;
	char *key = NULL;
	memset(s, 0, sizeof(*s));
	mb_err_clear(&err);
	mb_log_init("mbfs", o->verbose >= 2 ? MB_LOG_DEBUG :
			    o->verbose ? MB_LOG_INFO : MB_LOG_WARN);
	/* options, then the environment, then the profile, as a mount */
	const char *env_url = getenv("MAINBRELLA_API_URL");
	struct mb_profile prof;
	if (mb_config_select(o->profile, o->api_url ? o->api_url
			     : env_url && *env_url ? env_url : NULL, &prof, &err) ||
	    mb_cred_api_url_for(o->api_url, &prof, &s->url, &err) ||
	    mb_cred_load_key_for(o->key_file, &prof, &key, &err)) {
		fprintf(stderr, "mbfs: %s\n", err.msg);
		return 1;
	}
	if (mb_api_global_init()) {
		mb_cred_free_key(key);
		fprintf(stderr, "mbfs: cannot initialise libcurl\n");
		return 1;
	}
	s->curl = true;
	struct mb_client_opts co = {
		.api_url = s->url, .api_key = key, .use_limiter = true,
		.log_requests = o->verbose > 0,
	};
	int rc = mb_client_new(&co, &s->client, &err);
	mb_cred_free_key(key);
	if (rc) {
		fprintf(stderr, "mbfs: cannot set up the API client: %s\n", err.msg);
		return 1;
	}
	if (mb_mountinfo_list(true, &s->mounts, &s->nmounts, &err)) {
		/* not fatal: the service's answer matters more */
		mb_log(MB_LOG_WARN, "cannot tell which containers are mounted "
		       "here: %s", err.msg);
		s->mounts = NULL;
		s->nmounts = 0;
	}
	return 0;
}

static void session_close(struct session *s)
{
	if (s->client)
		mb_client_free(s->client);
	if (s->curl)
		mb_api_global_cleanup();
	free(s->mounts);
	free(s->url);
}

/* Does local mount m serve generation (id, gen) of this service? */
static bool serves(const struct session *s, const struct mb_mount *m,
		   const char *id, const char *gen)
{
	return m->has_control && strcmp(m->ctl.api_url, s->url) == 0 &&
	       strcmp(m->ctl.ident.id, id) == 0 &&
	       strcmp(m->ctl.ident.created_at, gen) == 0;
}

/* ---- --list ---- */

enum { C_ID, C_GEN, C_SIZE, C_IMAGE, C_STATUS, C_DEADLINE, C_IDLE,
       C_MOUNTED, NCOL };
static const char *const header[NCOL] = {
	"ID", "GENERATION", "SIZE", "IMAGE", "STATUS", "DEADLINE", "IDLE",
	"MOUNTED ON",
};

static const char *image_of(const struct mb_container *ct)
{
	return ct->catalog_id[0] ? ct->catalog_id
		: ct->image_name[0] ? ct->image_name
		: ct->image_id[0] ? ct->image_id : "-";
}

/* The local mounts of ct, joined with ", " ("-" when none); malloc'd. */
static char *mounts_of(const struct session *s, const struct mb_container *ct)
{
	size_t len = 0;
	for (size_t i = 0; i < s->nmounts; i++)
		if (serves(s, &s->mounts[i], ct->id, ct->created_at))
			len += strlen(s->mounts[i].mountpoint) + 2;
	char *out = malloc(len + 2);
	if (!out)
		return NULL;
	strcpy(out, len ? "" : "-");
	for (size_t i = 0; i < s->nmounts; i++) {
		if (!serves(s, &s->mounts[i], ct->id, ct->created_at))
			continue;
		if (out[0])
			strcat(out, ", ");
		strcat(out, s->mounts[i].mountpoint);
	}
	return out;
}

/* One row of text cells (each malloc'd) for ct. */
static int row_of(const struct session *s, const struct mb_container *ct,
		  time_t now, char *cell[NCOL])
{
	char dl[64] = "-", idle[64] = "-", span[32];
	time_t t;
	int msec;
	if (ct->expires_at[0] && mb_parse_iso8601(ct->expires_at, &t, &msec) == 0)
		mbfs_when_deadline(t, now, dl, sizeof(dl));
	if (ct->idle_timeout_ms > 0) {
		/* the service does not say when the idle deadline falls
		 * (contract §2.2), only how long idleness lasts */
		mbfs_when_span(ct->idle_timeout_ms, span, sizeof(span));
		snprintf(idle, sizeof(idle), "after %s idle", span);
	}
	cell[C_ID] = strdup(ct->id);
	cell[C_GEN] = strdup(ct->created_at);
	cell[C_SIZE] = strdup(ct->size[0] ? ct->size : "-");
	cell[C_IMAGE] = strdup(image_of(ct));
	cell[C_STATUS] = strdup(ct->status);
	cell[C_DEADLINE] = strdup(dl);
	cell[C_IDLE] = strdup(idle);
	cell[C_MOUNTED] = mounts_of(s, ct);
	for (int c = 0; c < NCOL; c++)
		if (!cell[c])
			return -ENOMEM;
	return 0;
}

static void print_row(const char *const cell[NCOL], const size_t w[NCOL])
{
	for (int c = 0; c < NCOL - 1; c++)
		printf("%-*s  ", (int)w[c], cell[c]);
	printf("%s\n", cell[NCOL - 1]);
}

/* Aligned columns under a header, as `docker ps`. */
static int print_table(const struct session *s, const struct mb_container *v,
		       size_t n)
{
	char *(*rows)[NCOL] = calloc(n ? n : 1, sizeof(*rows));
	size_t w[NCOL];
	time_t now = time(NULL);
	int rc = 0;
	if (!rows)
		return -ENOMEM;
	for (int c = 0; c < NCOL; c++)
		w[c] = strlen(header[c]);
	for (size_t i = 0; i < n && !rc; i++) {
		rc = row_of(s, &v[i], now, rows[i]);
		for (int c = 0; c < NCOL && !rc; c++)
			if (strlen(rows[i][c]) > w[c])
				w[c] = strlen(rows[i][c]);
	}
	if (!rc) {
		print_row(header, w);
		for (size_t i = 0; i < n; i++)
			print_row((const char *const *)rows[i], w);
	}
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < NCOL; c++)
			free(rows[i][c]);
	free(rows);
	return rc;
}

static cJSON *json_of(const struct session *s, const struct mb_container *ct)
{
	cJSON *o = cJSON_CreateObject(), *mnts;
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", ct->id);
	cJSON_AddStringToObject(o, "createdAt", ct->created_at);
	cJSON_AddStringToObject(o, "status", ct->status);
	if (ct->size[0])
		cJSON_AddStringToObject(o, "size", ct->size);
	else
		cJSON_AddNullToObject(o, "size");
	if (ct->catalog_id[0])
		cJSON_AddStringToObject(o, "catalogId", ct->catalog_id);
	if (ct->image_id[0])
		cJSON_AddStringToObject(o, "imageId", ct->image_id);
	if (ct->image_name[0])
		cJSON_AddStringToObject(o, "imageName", ct->image_name);
	if (ct->expires_at[0])
		cJSON_AddStringToObject(o, "expiresAt", ct->expires_at);
	else
		cJSON_AddNullToObject(o, "expiresAt");
	if (ct->idle_timeout_ms > 0)
		cJSON_AddNumberToObject(o, "idleTimeoutMs",
					(double)ct->idle_timeout_ms);
	else
		cJSON_AddNullToObject(o, "idleTimeoutMs");
	mnts = cJSON_AddArrayToObject(o, "mounts");
	for (size_t i = 0; mnts && i < s->nmounts; i++)
		if (serves(s, &s->mounts[i], ct->id, ct->created_at))
			cJSON_AddItemToArray(mnts, cJSON_CreateString(
					     s->mounts[i].mountpoint));
	return o;
}

static int print_json(const struct session *s, const struct mb_container *v,
		      size_t n)
{
	cJSON *arr = cJSON_CreateArray();
	char *text = NULL;
	for (size_t i = 0; arr && i < n; i++) {
		cJSON *o = json_of(s, &v[i]);
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			arr = NULL;
		}
	}
	if (arr)
		text = cJSON_Print(arr);
	cJSON_Delete(arr);
	if (!text)
		return -ENOMEM;
	printf("%s\n", text);
	free(text);
	return 0;
}

/* Local mounts of this service whose generation is not running any more:
 * every operation there fails, and only unmounting helps. */
static void warn_stale_mounts(const struct session *s,
			      const struct mb_container *v, size_t n)
{
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct mb_mount *m = &s->mounts[i];
		bool live = false;
		if (!m->has_control && m->control_errno == ETIMEDOUT)
			fprintf(stderr, "mbfs: '%s' does not answer (its control "
				"file took over 3 s to read): left out of this list\n",
				m->mountpoint);
		if (!m->has_control || strcmp(m->ctl.api_url, s->url) != 0)
			continue;
		for (size_t j = 0; j < n && !live; j++)
			live = serves(s, m, v[j].id, v[j].created_at);
		if (!live)
			fprintf(stderr, "mbfs: '%s' mounts %s@%s, which is no "
				"longer running: unmount it (fusermount3 -u '%s')\n",
				m->mountpoint, m->ctl.ident.id,
				m->ctl.ident.created_at, m->mountpoint);
	}
}

int mbfs_list_main(int argc, char **argv)
{
	struct cli o;
	struct session s;
	struct mb_container *v = NULL;
	size_t n = 0;
	struct mb_err err;
	int ret = parse_args(&o, "--list", argc, argv);
	if (ret) {
		cli_release(&o);
		return ret;
	}
	mb_err_clear(&err);
	ret = session_open(&s, &o);
	if (!ret && mb_containers_list(s.client, &v, &n, &err)) {
		fprintf(stderr, "mbfs: %s\n", err.msg);
		ret = 1;
	}
	if (!ret) {
		int rc = o.json ? print_json(&s, v, n)
			: n ? print_table(&s, v, n) : 0;
		if (!o.json && !n)
			printf("no containers are running (start one: mbfs "
			       "--create MOUNTPOINT)\n");
		if (rc) {
			fprintf(stderr, "mbfs: out of memory\n");
			ret = 1;
		}
		warn_stale_mounts(&s, v, n);
	}
	free(v);
	session_close(&s);
	cli_release(&o);
	return ret;
}

/* ---- --stop ---- */

/* The target as an identity with its generation; 0, or 1 with the message
 * printed. */
static int stop_target(const char *target, struct mb_ident *who)
{
	struct mb_err err;
	char dir[MB_PATH_MAX];
	mb_err_clear(&err);
	if (strchr(target, '/') && !strstr(target, ":/")) {
		fprintf(stderr, "mbfs: '%s' is not ID@GENERATION: --stop takes "
			"a container (see mbfs --list), not a mountpoint\n",
			target);
		return 1;
	}
	if (mb_ident_parse_spec(target, who, dir, &err)) {
		fprintf(stderr, "mbfs: cannot stop '%s': %s (see mbfs --list)\n",
			target, err.msg);
		return 1;
	}
	if (dir[0]) {
		fprintf(stderr, "mbfs: cannot stop '%s': give ID@GENERATION "
			"without a directory\n", target);
		return 1;
	}
	if (!who->created_at[0]) {
		fprintf(stderr, "mbfs: cannot stop '%s': give its generation "
			"too, as in 'mbfs --stop %s@GENERATION' (see mbfs "
			"--list)\n", target, who->id);
		return 1;
	}
	return 0;
}

/* Why DELETE said the generation is not running: the slot is empty, or
 * runs another generation. */
static void explain_not_running(const struct session *s,
				const struct mb_ident *who)
{
	struct mb_container ct;
	struct mb_err e;
	mb_err_clear(&e);
	if (mb_container_find(s->client, who->id, &ct, &e) == 0 &&
	    strcmp(ct.created_at, who->created_at) != 0)
		fprintf(stderr, "mbfs: cannot stop %s@%s: that generation is "
			"not running (container '%s' now runs %s; see mbfs "
			"--list)\n", who->id, who->created_at, who->id,
			ct.created_at);
	else
		fprintf(stderr, "mbfs: cannot stop %s@%s: that generation is "
			"not running (stopped or expired; see mbfs --list)\n",
			who->id, who->created_at);
}

/* 1 (message printed) when who is mounted here and !force, else 0. */
static int refuse_mounted(const struct session *s, const struct mb_ident *who,
			  bool force)
{
	for (size_t i = 0; i < s->nmounts && !force; i++) {
		const char *mp = s->mounts[i].mountpoint;
		if (!serves(s, &s->mounts[i], who->id, who->created_at))
			continue;
		fprintf(stderr, "mbfs: %s@%s is mounted on '%s': unmount it "
			"first (mbfs --status --wait '%s' && fusermount3 -u "
			"'%s'), or stop it anyway with --force\n", who->id,
			who->created_at, mp, mp, mp);
		return 1;
	}
	return 0;
}

/* After --force: the mounts left without their sandbox. */
static void warn_orphans(const struct session *s, const struct mb_ident *who)
{
	for (size_t i = 0; i < s->nmounts; i++) {
		const char *mp = s->mounts[i].mountpoint;
		if (serves(s, &s->mounts[i], who->id, who->created_at))
			fprintf(stderr, "mbfs: '%s' still mounts %s@%s, where "
				"every operation now fails: unmount it "
				"(fusermount3 -u '%s')\n", mp, who->id,
				who->created_at, mp);
	}
}

int mbfs_stop_main(int argc, char **argv)
{
	struct cli o;
	struct session s;
	struct mb_ident who;
	struct mb_err err;
	int ret = parse_args(&o, "--stop", argc, argv);
	if (ret || (ret = stop_target(o.target, &who))) {
		cli_release(&o);
		return ret;
	}
	mb_err_clear(&err);
	ret = session_open(&s, &o);
	if (!ret)
		ret = refuse_mounted(&s, &who, o.force);
	if (!ret && mb_container_delete(s.client, &who, &err)) {
		ret = 1;
		if (mb_err_is_stopped(&err))
			explain_not_running(&s, &who);
		else
			fprintf(stderr, "mbfs: %s%s\n", err.msg, err.ambiguous
				? " (it may have stopped anyway: see mbfs --list)"
				: "");
	}
	if (!ret) {
		printf("stopped %s@%s\n", who.id, who.created_at);
		warn_orphans(&s, &who);
	}
	session_close(&s);
	cli_release(&o);
	return ret;
}
