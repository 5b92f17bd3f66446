/* mbapi: a small command-line front end to common/ for tests and debugging.
 *
 *   mbapi [--url U] [--key-file F] [--timeout MS] [--no-limiter] CMD ARGS...
 *
 * The key comes from $MAINBRELLA_API_KEY or a key file, never from argv.
 * Results are JSON (one object per line) or raw bytes (get, export, follow);
 * a failure prints "mbapi: <message>" and then a line
 * "errno=<NAME> status=<http> code=<api code> ambiguous=<0|1>" on stderr and
 * exits with status 1. Run "mbapi help" for the commands.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/api.h"
#include "common/buf.h"
#include "common/cred.h"
#include "common/err.h"
#include "common/ident.h"
#include "common/limiter.h"
#include "common/log.h"
#include "common/util.h"

static const char usage[] =
"usage: mbapi [--url U] [--key-file F] [--timeout MS] [--no-limiter] [-v] CMD ...\n"
"API:     containers | create [KEY] | delete ID GEN\n"
"         ls ID GEN PATH [LIMIT OFFSET] | stat ID GEN PATH [follow]\n"
"         get ID GEN PATH >out | put ID GEN PATH <in\n"
"         mkdir ID GEN PATH [-p] [MODE] | rm ID GEN PATH [-r]\n"
"         mv ID GEN SRC DST | chmod ID GEN PATH MODE\n"
"         exec ID GEN CMD [TIMEOUT_MS] | export ID GEN >out.tgz\n"
"         job ID GEN CMD [KEY|-] [stdin|-] [TIMEOUT_MS] | job-get ID GEN EID\n"
"         job-list ID GEN\n"
"         follow ID GEN EID [CURSOR] [--json] | cancel ID GEN EID\n"
"         stdin ID GEN EID <in | stdin-close ID GEN EID | signal ID GEN EID SIG\n"
"local:   spec-parse SPEC | control-format URL ID GEN ROOT MNT PID\n"
"         control-parse <json | control-find DIR | key | url [URL]\n"
"         sha256 [<in] | base64 [<in] | unbase64 [<in] | duration S | iso S\n"
"         shq S | errno OP CODE [STATUS] | limiter-hold ID MS | limiter-try ID MS\n"
"         limiter-threads ID N (max slots held at once by N threads)\n";

static struct mb_err err;

static int fail(void)
{
	fprintf(stderr, "mbapi: %s\n", err.msg[0] ? err.msg : "failed");
	fprintf(stderr, "errno=%s status=%d code=%s ambiguous=%d\n",
		strerrorname_np(err.errnum) ? strerrorname_np(err.errnum) : "?",
		err.http_status, err.code[0] ? err.code : "-", err.ambiguous);
	return 1;
}

static int need(int argc, int n)
{
	if (argc < n) {
		fputs(usage, stderr);
		exit(2);
	}
	return 0;
}

/* Read all of stdin (at most max bytes). */
static int read_stdin(struct mb_buf *b)
{
	char chunk[65536];
	ssize_t n;

	while ((n = read(0, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || mb_buf_append(b, chunk, (size_t)n))
			return mb_err_set(&err, n < 0 ? errno : EFBIG, "cannot read stdin");
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static void print_json(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	if (s)
		printf("%s\n", s);
	free(s);
	cJSON_Delete(o);
}

/* Bytes that may hold NULs, for tests to compare exactly. */
static void add_b64(cJSON *o, const char *key, const char *p, size_t n)
{
	char *s = NULL;

	if (mb_base64_encode(p, n, &s, NULL) == 0)
		cJSON_AddStringToObject(o, key, s);
	free(s);
}

static const char *type_name(enum mb_ftype t)
{
	static const char *const n[] = { "file", "directory", "symlink", "fifo",
					 "socket", "character", "block", "other" };
	return (unsigned)t < 8 ? n[t] : "other";
}

static cJSON *entry_json(const struct mb_entry *e)
{
	cJSON *o = cJSON_CreateObject();
	char mode[8];

	snprintf(mode, sizeof(mode), "%04o", e->mode);
	cJSON_AddStringToObject(o, "name", e->name);
	cJSON_AddStringToObject(o, "type", type_name(e->type));
	cJSON_AddNumberToObject(o, "size", (double)e->size);
	cJSON_AddStringToObject(o, "mode", mode);
	cJSON_AddNumberToObject(o, "uid", e->uid);
	cJSON_AddNumberToObject(o, "gid", e->gid);
	cJSON_AddNumberToObject(o, "mtime", (double)e->mtime);
	if (e->link_target)
		cJSON_AddStringToObject(o, "linkTarget", e->link_target);
	return o;
}

static cJSON *job_json(const struct mb_job *j)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", j->id);
	cJSON_AddStringToObject(o, "status", j->status);
	cJSON_AddNumberToObject(o, "cursor", (double)j->cursor);
	cJSON_AddNumberToObject(o, "outputBytes", (double)j->output_bytes);
	if (j->has_exit_code)
		cJSON_AddNumberToObject(o, "exitCode", j->exit_code);
	else
		cJSON_AddNullToObject(o, "exitCode");
	cJSON_AddBoolToObject(o, "timedOut", j->timed_out);
	cJSON_AddBoolToObject(o, "terminal", mb_job_is_terminal(j));
	cJSON_AddNumberToObject(o, "stdinBytes", (double)j->stdin_bytes);
	return o;
}

static int ident_of(const char *id, const char *gen, struct mb_ident *who)
{
	memset(who, 0, sizeof(*who));
	if (strlen(id) >= sizeof(who->id) || strlen(gen) >= sizeof(who->created_at))
		return mb_err_set(&err, EINVAL, "container id or generation too long");
	strcpy(who->id, id);
	strcpy(who->created_at, gen);
	return 0;
}

struct follow_out {
	bool json;
};

static int on_event(const struct mb_job_event *ev, void *ud)
{
	struct follow_out *fo = ud;
	cJSON *o;

	if (!fo->json) {
		if (ev->kind == MB_JOB_EV_STDOUT)
			write_all(1, ev->data, ev->len);
		else if (ev->kind == MB_JOB_EV_STDERR)
			write_all(2, ev->data, ev->len);
		return 0;
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "kind", ev->kind);
	cJSON_AddNumberToObject(o, "seq", (double)ev->seq);
	if (ev->data) {
		char *d = strndup(ev->data, ev->len);

		cJSON_AddStringToObject(o, "data", d ? d : "");
		free(d);
	}
	if (ev->job)
		cJSON_AddItemToObject(o, "job", job_json(ev->job));
	print_json(o);
	fflush(stdout);
	return 0;
}

struct holder {
	struct mb_limiter *l;
	pthread_mutex_t *lock;
	int *now, *max;
};

/* Take a slot, note how many are held, hold it a while, release. */
static void *hold_slot(void *arg)
{
	struct holder *h = arg;
	struct mb_limit_slot *s;
	struct mb_err e;
	int i;

	for (i = 0; i < 5; i++) {
		if (mb_limiter_acquire(h->l, 10000, &s, &e))
			return (void *)1;
		pthread_mutex_lock(h->lock);
		if (++*h->now > *h->max)
			*h->max = *h->now;
		pthread_mutex_unlock(h->lock);
		mb_sleep_ms(20);
		pthread_mutex_lock(h->lock);
		--*h->now;
		pthread_mutex_unlock(h->lock);
		mb_limiter_release(s);
	}
	return NULL;
}

static int limiter_threads(const char *key, int n)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct mb_limiter *l;
	pthread_t t[64];
	struct holder h;
	int now = 0, max = 0, i, r, failed = 0;

	if (n < 1 || n > 64)
		return mb_err_set(&err, EINVAL, "1..64 threads");
	if ((r = mb_limiter_open(key, &l, &err)))
		return r;
	h.l = l;
	h.lock = &lock;
	h.now = &now;
	h.max = &max;
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, hold_slot, &h);
	for (i = 0; i < n; i++) {
		void *res;

		pthread_join(t[i], &res);
		failed |= res != NULL;
	}
	mb_limiter_free(l);
	if (failed)
		return mb_err_set(&err, ETIMEDOUT, "a thread could not get a slot");
	printf("%d\n", max);
	return 0;
}

/* Commands that need no server. */
static int local_cmd(int argc, char **argv, int *handled)
{
	const char *cmd = argv[0];
	struct mb_buf in;
	int r = 0;

	*handled = 1;
	mb_buf_init(&in, 64u << 20);
	if (strcmp(cmd, "spec-parse") == 0) {
		struct mb_ident id;
		char dir[MB_PATH_MAX];
		cJSON *o;

		need(argc, 2);
		if ((r = mb_ident_parse_spec(argv[1], &id, dir, &err)))
			goto out;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", id.id);
		cJSON_AddStringToObject(o, "createdAt", id.created_at);
		cJSON_AddStringToObject(o, "dir", dir);
		print_json(o);
	} else if (strcmp(cmd, "control-format") == 0) {
		struct mb_control c;
		char *s;

		need(argc, 7);
		memset(&c, 0, sizeof(c));
		snprintf(c.api_url, sizeof(c.api_url), "%s", argv[1]);
		snprintf(c.ident.id, sizeof(c.ident.id), "%s", argv[2]);
		snprintf(c.ident.created_at, sizeof(c.ident.created_at), "%s", argv[3]);
		snprintf(c.root, sizeof(c.root), "%s", argv[4]);
		snprintf(c.mountpoint, sizeof(c.mountpoint), "%s", argv[5]);
		c.pid = atol(argv[6]);
		s = mb_control_format(&c);
		if (!s)
			r = mb_err_set(&err, ENOMEM, "out of memory");
		else
			fputs(s, stdout);
		free(s);
	} else if (strcmp(cmd, "control-parse") == 0 || strcmp(cmd, "control-find") == 0) {
		char rel[MB_PATH_MAX] = "";
		struct mb_control c;
		cJSON *o;

		if (cmd[8] == 'p') {
			if ((r = read_stdin(&in)) ||
			    (r = mb_control_parse(in.data ? in.data : "", in.len, &c, &err)))
				goto out;
		} else {
			need(argc, 2);
			if ((r = mb_control_find(argv[1], &c, rel, &err)))
				goto out;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "apiUrl", c.api_url);
		cJSON_AddStringToObject(o, "id", c.ident.id);
		cJSON_AddStringToObject(o, "createdAt", c.ident.created_at);
		cJSON_AddStringToObject(o, "root", c.root);
		cJSON_AddStringToObject(o, "mountpoint", c.mountpoint);
		cJSON_AddNumberToObject(o, "pid", (double)c.pid);
		cJSON_AddStringToObject(o, "version", c.version);
		cJSON_AddStringToObject(o, "rel", rel);
		print_json(o);
	} else if (strcmp(cmd, "sha256") == 0) {
		char hex[65];

		if ((r = read_stdin(&in)))
			goto out;
		mb_sha256_hex(in.data ? in.data : "", in.len, hex);
		printf("%s\n", hex);
	} else if (strcmp(cmd, "base64") == 0 || strcmp(cmd, "unbase64") == 0) {
		size_t n = 0;
		char *s = NULL;

		if ((r = read_stdin(&in)))
			goto out;
		if (cmd[0] == 'b')
			r = mb_base64_encode(in.data ? in.data : "", in.len, &s, &n);
		else
			r = mb_base64_decode(in.data ? in.data : "", in.len,
					     (unsigned char **)&s, &n);
		if (r) {
			mb_err_set(&err, -r, "invalid input");
			goto out;
		}
		write_all(1, s, n);
		free(s);
	} else if (strcmp(cmd, "duration") == 0) {
		uint64_t ms;

		need(argc, 2);
		if ((r = mb_parse_duration_ms(argv[1], &ms))) {
			mb_err_set(&err, -r, "invalid duration '%s'", argv[1]);
			goto out;
		}
		printf("%llu\n", (unsigned long long)ms);
	} else if (strcmp(cmd, "iso") == 0) {
		char again[32];
		time_t t;
		int ms;

		need(argc, 2);
		if ((r = mb_parse_iso8601(argv[1], &t, &ms))) {
			mb_err_set(&err, -r, "invalid time '%s'", argv[1]);
			goto out;
		}
		mb_format_iso8601(t, ms, again);
		printf("%lld %d %s %d\n", (long long)t, ms, again,
		       mb_is_canonical_generation(argv[1]));
	} else if (strcmp(cmd, "shq") == 0) {
		struct mb_buf b;

		need(argc, 2);
		mb_buf_init(&b, MB_BUF_UNLIMITED);
		mb_buf_append_shq(&b, argv[1]);
		printf("%s\n", b.data);
		mb_buf_release(&b);
	} else if (strcmp(cmd, "errno") == 0) {
		static const char *const ops[] = { "other", "get", "put", "list",
			"stat", "mkdir", "remove", "move", "chmod", "exec", "job",
			"containers", "export" };
		int op = 0, i;

		need(argc, 3);
		for (i = 0; i < 13; i++)
			if (strcmp(argv[1], ops[i]) == 0)
				op = i;
		r = mb_err_api(&err, (enum mb_op)op, argc > 3 ? atoi(argv[3]) : 409,
			       argv[2], "cannot do it");
		printf("%s %d\n%s\n", strerrorname_np(err.errnum), err.ambiguous, err.msg);
		r = 0;
	} else if (strcmp(cmd, "key") == 0) {
		char *key = NULL;

		if ((r = mb_cred_load_key(NULL, &key, &err)))
			goto out;
		printf("key ok, %zu bytes\n", strlen(key));
		mb_cred_free_key(key);
	} else if (strcmp(cmd, "url") == 0) {
		char *u = NULL;

		if ((r = mb_cred_api_url(argc > 1 ? argv[1] : NULL, &u, &err)))
			goto out;
		printf("%s\n", u);
		free(u);
	} else if (strcmp(cmd, "limiter-threads") == 0) {
		char key[64];

		need(argc, 3);
		snprintf(key, sizeof(key), "threads %.40s", argv[1]);
		r = limiter_threads(key, atoi(argv[2]));
	} else if (strcmp(cmd, "limiter-hold") == 0 || strcmp(cmd, "limiter-try") == 0) {
		struct mb_limiter *l = NULL;
		struct mb_limit_slot *s = NULL;
		char key[600];
		char *u = NULL;
		uint64_t ms;

		need(argc, 3);
		if ((r = mb_cred_api_url(NULL, &u, &err)))
			goto out;
		snprintf(key, sizeof(key), "%s %s", u, argv[1]);
		free(u);
		if (mb_parse_u64(argv[2], 0, 86400000, &ms)) {
			r = mb_err_set(&err, EINVAL, "bad milliseconds '%s'", argv[2]);
			goto out;
		}
		if ((r = mb_limiter_open(key, &l, &err)))
			goto out;
		r = mb_limiter_acquire(l, cmd[8] == 't' ? (long)ms : -1, &s, &err);
		if (!r) {
			printf("held\n");
			fflush(stdout);
			if (cmd[8] == 'h')
				mb_sleep_ms(ms);
			mb_limiter_release(s);
		}
		mb_limiter_free(l);
	} else {
		*handled = 0;
	}
out:
	mb_buf_release(&in);
	return r;
}

static int file_cmd(struct mb_client *c, const struct mb_ident *who,
		    int argc, char **argv, int *handled)
{
	const char *cmd = argv[0], *path = argc > 3 ? argv[3] : "";
	struct mb_buf b;
	int r = 0;

	*handled = 1;
	mb_buf_init(&b, 64u << 20);
	if (strcmp(cmd, "get") == 0) {
		need(argc, 4);
		if (!(r = mb_file_get(c, who, path, &b, &err)))
			write_all(1, b.data ? b.data : "", b.len);
	} else if (strcmp(cmd, "put") == 0) {
		need(argc, 4);
		if (!(r = read_stdin(&b)))
			r = mb_file_put(c, who, path, b.data, b.len, &err);
	} else if (strcmp(cmd, "ls") == 0) {
		struct mb_entry_list l;
		long next = -1;
		cJSON *o, *a;
		size_t i;

		need(argc, 4);
		if (argc > 5)
			r = mb_fs_list(c, who, path, (unsigned)atoi(argv[4]),
				       strtoul(argv[5], NULL, 10), &l, &next, &err);
		else
			r = mb_fs_list_all(c, who, path, &l, &err);
		if (r)
			goto out;
		o = cJSON_CreateObject();
		a = cJSON_AddArrayToObject(o, "entries");
		for (i = 0; i < l.n; i++)
			cJSON_AddItemToArray(a, entry_json(&l.v[i]));
		cJSON_AddNumberToObject(o, "count", (double)l.n);
		cJSON_AddNumberToObject(o, "next", (double)next);
		mb_entry_list_release(&l);
		print_json(o);
	} else if (strcmp(cmd, "stat") == 0) {
		struct mb_entry e;

		need(argc, 4);
		if (!(r = mb_fs_stat(c, who, path, argc > 4, &e, &err))) {
			print_json(entry_json(&e));
			mb_entry_release(&e);
		}
	} else if (strcmp(cmd, "mkdir") == 0) {
		bool p = argc > 4 && strcmp(argv[4], "-p") == 0;
		const char *m = argc > 4 + p ? argv[4 + p] : "0755";

		need(argc, 4);
		r = mb_fs_mkdir(c, who, path, p, (unsigned)strtoul(m, NULL, 8), &err);
	} else if (strcmp(cmd, "rm") == 0) {
		need(argc, 4);
		r = mb_fs_remove(c, who, path, argc > 4 && strcmp(argv[4], "-r") == 0, &err);
	} else if (strcmp(cmd, "mv") == 0) {
		need(argc, 5);
		r = mb_fs_move(c, who, path, argv[4], &err);
	} else if (strcmp(cmd, "chmod") == 0) {
		need(argc, 5);
		r = mb_fs_chmod(c, who, path, (unsigned)strtoul(argv[4], NULL, 8), &err);
	} else if (strcmp(cmd, "export") == 0) {
		r = mb_export(c, who, 1, &err);
	} else {
		*handled = 0;
	}
out:
	mb_buf_release(&b);
	return r;
}

static int job_cmd(struct mb_client *c, const struct mb_ident *who,
		   int argc, char **argv)
{
	const char *cmd = argv[0], *eid = argc > 3 ? argv[3] : "";
	struct mb_buf b;
	struct mb_job j;
	int r = 0;

	mb_buf_init(&b, 64u << 20);
	if (strcmp(cmd, "exec") == 0) {
		struct mb_exec_result x;
		cJSON *o;

		need(argc, 4);
		r = mb_exec(c, who, argv[3], argc > 4 ? atol(argv[4]) : 0, &x, &err);
		if (r)
			goto out;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "stdout", x.out);
		cJSON_AddStringToObject(o, "stderr", x.errout);
		add_b64(o, "stdoutBase64", x.out, x.out_len);
		if (x.has_exit_code)
			cJSON_AddNumberToObject(o, "exitCode", x.exit_code);
		else
			cJSON_AddNullToObject(o, "exitCode");
		cJSON_AddBoolToObject(o, "timedOut", x.timed_out);
		cJSON_AddBoolToObject(o, "outputTruncated", x.output_truncated);
		mb_exec_result_release(&x);
		print_json(o);
	} else if (strcmp(cmd, "job") == 0) {
		struct mb_job_req q;
		char key[33];

		need(argc, 4);
		memset(&q, 0, sizeof(q));
		q.command = argv[3];
		if (argc > 4 && strcmp(argv[4], "-") != 0) {
			q.idempotency_key = argv[4];
		} else {
			mb_random_hex(key, 16);
			q.idempotency_key = key;
		}
		q.stdin_enabled = argc > 5 && strcmp(argv[5], "stdin") == 0;
		q.timeout_ms = argc > 6 ? atol(argv[6]) : 0;
		if (!(r = mb_job_create(c, who, &q, &j, &err)))
			print_json(job_json(&j));
	} else if (strcmp(cmd, "job-get") == 0) {
		cJSON *o;

		need(argc, 4);
		if (!(r = mb_job_get(c, who, eid, &j, &b, NULL, &err))) {
			o = job_json(&j);
			cJSON_AddStringToObject(o, "stdout", b.data ? b.data : "");
			add_b64(o, "stdoutBase64", b.data ? b.data : "", b.len);
			print_json(o);
		}
	} else if (strcmp(cmd, "job-list") == 0) {
		struct mb_job *v = NULL;
		size_t n = 0, i;
		cJSON *a;

		if (!(r = mb_job_list(c, who, &v, &n, &err))) {
			a = cJSON_CreateArray();
			for (i = 0; i < n; i++)
				cJSON_AddItemToArray(a, job_json(&v[i]));
			print_json(a);
		}
		free(v);
	} else if (strcmp(cmd, "follow") == 0) {
		struct follow_out fo = { argc > 5 || (argc > 4 && strcmp(argv[4], "--json") == 0) };
		long cursor = argc > 4 && argv[4][0] != '-' ? atol(argv[4]) : 0;

		need(argc, 4);
		r = mb_job_follow(c, who, eid, &cursor, on_event, &fo, &j, &err);
		if (!r)
			fprintf(stderr, "status=%s cursor=%ld\n", j.status, cursor);
	} else if (strcmp(cmd, "cancel") == 0) {
		need(argc, 4);
		r = mb_job_cancel(c, who, eid, &err);
	} else if (strcmp(cmd, "stdin") == 0) {
		need(argc, 4);
		if (!(r = read_stdin(&b)))
			r = mb_job_stdin(c, who, eid, b.data, b.len, &err);
	} else if (strcmp(cmd, "stdin-close") == 0) {
		need(argc, 4);
		r = mb_job_stdin_close(c, who, eid, &err);
	} else if (strcmp(cmd, "signal") == 0) {
		need(argc, 5);
		r = mb_job_signal(c, who, eid, argv[4], &err);
	} else {
		fputs(usage, stderr);
		r = -EINVAL;
		mb_err_set(&err, EINVAL, "unknown command '%s'", cmd);
	}
out:
	mb_buf_release(&b);
	return r;
}

static int api_cmd(struct mb_client *c, int argc, char **argv)
{
	const char *cmd = argv[0];
	struct mb_ident who;
	int r, handled;

	if (strcmp(cmd, "containers") == 0) {
		struct mb_container *v = NULL;
		size_t n = 0, i;
		cJSON *a;

		if ((r = mb_containers_list(c, &v, &n, &err)))
			return r;
		a = cJSON_CreateArray();
		for (i = 0; i < n; i++) {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddStringToObject(o, "id", v[i].id);
			cJSON_AddStringToObject(o, "createdAt", v[i].created_at);
			cJSON_AddStringToObject(o, "status", v[i].status);
			cJSON_AddItemToArray(a, o);
		}
		free(v);
		print_json(a);
		return 0;
	}
	if (strcmp(cmd, "create") == 0) {
		struct mb_create_req q = { NULL, NULL, argc > 1 ? argv[1] : NULL };
		uint64_t deadline = mb_now_ms() + 130000;
		struct mb_creation cn;
		char key[33];
		cJSON *o;

		if (!q.idempotency_key) {
			mb_random_hex(key, 16);
			q.idempotency_key = key;
		}
		while ((r = mb_container_create(c, &q, &cn, &err)) == -EAGAIN &&
		       mb_now_ms() < deadline)
			mb_sleep_ms(1000);
		if (r)
			return r;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", cn.container_id);
		cJSON_AddStringToObject(o, "createdAt", cn.created_at);
		cJSON_AddStringToObject(o, "status", cn.status);
		print_json(o);
		return 0;
	}
	need(argc, 3);
	if ((r = ident_of(argv[1], argv[2], &who)))
		return r;
	if (strcmp(cmd, "delete") == 0)
		return mb_container_delete(c, &who, &err);
	r = file_cmd(c, &who, argc, argv, &handled);
	if (handled)
		return r;
	return job_cmd(c, &who, argc, argv);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "key-file", required_argument, NULL, 'k' },
		{ "timeout", required_argument, NULL, 't' },
		{ "no-limiter", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct mb_client_opts co = { .use_limiter = true };
	const char *url = NULL, *key_file = NULL;
	struct mb_client *c = NULL;
	char *key = NULL, *api_url = NULL;
	int ch, r, handled;

	mb_log_init("mbapi", MB_LOG_WARN);
	while ((ch = getopt_long(argc, argv, "+u:k:t:nv", opts, NULL)) != -1) {
		switch (ch) {
		case 'u': url = optarg; break;
		case 'k': key_file = optarg; break;
		case 't': co.op_timeout_ms = atol(optarg); break;
		case 'n': co.use_limiter = false; break;
		case 'v': mb_log_set_level(MB_LOG_DEBUG); break;
		default: fputs(usage, stderr); return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1 || strcmp(argv[0], "help") == 0) {
		fputs(usage, argc < 1 ? stderr : stdout);
		return argc < 1 ? 2 : 0;
	}
	r = local_cmd(argc, argv, &handled);
	if (handled)
		return r ? fail() : 0;
	if (mb_api_global_init())
		return mb_err_set(&err, EIO, "cannot initialise libcurl"), fail();
	if ((r = mb_cred_api_url(url, &api_url, &err)) ||
	    (r = mb_cred_load_key(key_file, &key, &err)))
		goto out;
	co.api_url = api_url;
	co.api_key = key;
	if ((r = mb_client_new(&co, &c, &err)))
		goto out;
	r = api_cmd(c, argc, argv);
out:
	mb_client_free(c);
	mb_cred_free_key(key);
	free(api_url);
	mb_api_global_cleanup();
	return r ? fail() : 0;
}
