/* config.c: read the configuration file and pick a profile (config.h).
 *
 * One pass over the whole file checks every line and keeps the profile
 * wanted. It neither reads the key nor decides precedence (cred.c does).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/cred.h"

#define CONFIG_MAX (64 * 1024)
#define MAX_PROFILES 64

int mb_config_path(char *out, size_t n)
{
	const char *x = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	int w;

	if (x && x[0] == '/')
		w = snprintf(out, n, "%s/mainbrella/config", x);
	else if (home && home[0] == '/')
		w = snprintf(out, n, "%s/.config/mainbrella/config", home);
	else
		return -ENOENT;
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

static size_t url_len(const char *u)
{
	size_t n = strlen(u);

	while (n && u[n - 1] == '/')
		n--;
	return n;
}

int mb_config_same_url(const char *a, const char *b)
{
	size_t n = url_len(a);

	return n == url_len(b) && strncasecmp(a, b, n) == 0;
}

/* The file, read whole into a NUL-terminated buffer: 0 and *text, 1 when
 * it does not exist, or -errno with err filled. */
static int read_config(const char *path, char **text, struct mb_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t r;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0)
		return mb_err_set(err, errno, "cannot open '%s': %s", path,
				  strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = mb_err_set(err, errno, "cannot stat '%s': %s", path,
				strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = mb_err_set(err, EINVAL, "'%s' is not a regular file", path);
		goto out;
	}
	/* it says where the key goes: nobody else may rewrite it */
	if (st.st_mode & 022) {
		rc = mb_err_set(err, EPERM,
				"'%s' is writable by group or others (mode %04o): run 'chmod go-w %s'",
				path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		rc = mb_err_set(err, EPERM, "'%s' is not owned by you: run 'chown %u %s'",
				path, (unsigned)geteuid(), path);
		goto out;
	}
	if (st.st_size > CONFIG_MAX) {
		rc = mb_err_set(err, EFBIG, "'%s' is too large (over %d bytes)",
				path, CONFIG_MAX);
		goto out;
	}
	buf = malloc(CONFIG_MAX + 1);
	if (!buf) {
		rc = mb_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	while (len < CONFIG_MAX) {
		r = read(fd, buf + len, CONFIG_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = mb_err_set(err, errno, "cannot read '%s': %s", path,
					strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (memchr(buf, '\0', len)) {
		rc = mb_err_set(err, EINVAL, "'%s' is not a text file", path);
		goto out;
	}
	buf[len] = '\0';
	*text = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= MB_CONFIG_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return 0;
	return 1;
}

/* key_file's value made absolute: "~/" is $HOME, a relative path is
 * relative to the config file's directory. */
static int expand_path(const char *v, const char *cfg, char *out, size_t n)
{
	const char *home = getenv("HOME");
	const char *slash = strrchr(cfg, '/');
	int w;

	if (v[0] == '~' && (v[1] == '/' || v[1] == '\0')) {
		if (!home || home[0] != '/')
			return -ENOENT;
		w = snprintf(out, n, "%s%s", home, v + 1);
	} else if (v[0] == '/') {
		w = snprintf(out, n, "%s", v);
	} else {
		w = snprintf(out, n, "%.*s/%s", (int)(slash - cfg), cfg, v);
	}
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* What the parse keeps of each profile. */
struct seen {
	char name[MB_CONFIG_NAME_MAX];
	unsigned line;
	struct mb_profile p;
};

struct parse {
	const char *path;
	struct seen *v;         /* MAX_PROFILES */
	size_t n;
};

/* Check one "key = value" line of profile s. */
static int setting(struct parse *ps, struct seen *s, char *line, unsigned ln,
		   struct mb_err *err)
{
	char *eq = strchr(line, '='), *key, *val, *u = NULL;
	struct mb_err uerr;
	int r;

	if (!eq)
		return mb_err_set(err, EINVAL,
				  "%s:%u: expected '[NAME]' or 'KEY = VALUE'",
				  ps->path, ln);
	*eq = '\0';
	key = trim(line);
	val = trim(eq + 1);
	if (!s)
		return mb_err_set(err, EINVAL,
				  "%s:%u: '%s' before the first [PROFILE] line",
				  ps->path, ln, key);
	if (!strcmp(key, "key") || !strcmp(key, "api_key"))
		return mb_err_set(err, EINVAL,
				  "%s:%u: the key does not go in this file: put it in a file of its own (mode 600) and name that with key_file",
				  ps->path, ln);
	if (strcmp(key, "url") && strcmp(key, "key_file"))
		return mb_err_set(err, EINVAL,
				  "%s:%u: unknown key '%s' (known: url, key_file)",
				  ps->path, ln, key);
	if (!*val)
		return mb_err_set(err, EINVAL, "%s:%u: '%s' has no value",
				  ps->path, ln, key);
	if (!strcmp(key, "url")) {
		if (s->p.url[0])
			return mb_err_set(err, EINVAL, "%s:%u: url is set twice in [%s]",
					  ps->path, ln, s->name);
		mb_err_clear(&uerr);
		if (mb_cred_api_url(val, &u, &uerr))
			return mb_err_set(err, EINVAL, "%s:%u: %s", ps->path, ln, uerr.msg);
		snprintf(s->p.url, sizeof(s->p.url), "%s", u);
		free(u);
		snprintf(s->p.url_at, sizeof(s->p.url_at), "%s:%u", ps->path, ln);
		return 0;
	}
	if (s->p.key_file[0])
		return mb_err_set(err, EINVAL, "%s:%u: key_file is set twice in [%s]",
				  ps->path, ln, s->name);
	r = expand_path(val, ps->path, s->p.key_file, sizeof(s->p.key_file));
	if (r)
		return mb_err_set(err, -r, "%s:%u: cannot expand key_file '%s'%s",
				  ps->path, ln, val,
				  r == -ENOENT ? ": HOME is not set" : ": too long");
	snprintf(s->p.key_file_at, sizeof(s->p.key_file_at), "%s:%u", ps->path, ln);
	return 0;
}

/* Every line of text; the profiles go to ps->v. */
static int parse(struct parse *ps, char *text, struct mb_err *err)
{
	struct seen *cur = NULL;
	unsigned ln = 0;
	char *line, *next, *t;
	size_t i;
	int r;

	for (line = text; line && *line; line = next) {
		ln++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		t = trim(line);
		if (!*t || *t == '#' || *t == ';')
			continue;
		if (*t != '[') {
			r = setting(ps, cur, t, ln, err);
			if (r)
				return r;
			continue;
		}
		size_t n = strlen(t);
		if (t[n - 1] != ']')
			return mb_err_set(err, EINVAL, "%s:%u: expected '[NAME]'",
					  ps->path, ln);
		t[n - 1] = '\0';
		t = trim(t + 1);
		if (!valid_name(t))
			return mb_err_set(err, EINVAL,
					  "%s:%u: invalid profile name '%s' (letters, digits, '_', '.', '-'; at most %d)",
					  ps->path, ln, t, MB_CONFIG_NAME_MAX - 1);
		for (i = 0; i < ps->n; i++)
			if (!strcmp(ps->v[i].name, t))
				return mb_err_set(err, EINVAL,
						  "%s:%u: profile [%s] again (first at line %u)",
						  ps->path, ln, t, ps->v[i].line);
		if (ps->n == MAX_PROFILES)
			return mb_err_set(err, EINVAL, "%s:%u: more than %d profiles",
					  ps->path, ln, MAX_PROFILES);
		cur = &ps->v[ps->n++];
		memset(cur, 0, sizeof(*cur));
		snprintf(cur->name, sizeof(cur->name), "%s", t);
		snprintf(cur->p.name, sizeof(cur->p.name), "%s", t);
		cur->line = ln;
	}
	return 0;
}

static const struct seen *find(const struct parse *ps, const char *name)
{
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->v[i].name, name))
			return &ps->v[i];
	return NULL;
}

static const struct seen *find_url(const struct parse *ps, const char *url)
{
	const struct seen *d = find(ps, "default");
	const char *u;

	for (size_t i = 0; i <= ps->n; i++) {
		const struct seen *s = i == 0 ? d : &ps->v[i - 1];
		if (!s)
			continue;
		u = s->p.url[0] ? s->p.url : MB_DEFAULT_API_URL;
		if (mb_config_same_url(u, url))
			return s;
	}
	return NULL;
}

static int missing(const struct parse *ps, const char *name, int exists,
		   struct mb_err *err)
{
	char list[256] = "";
	size_t used = 0;

	if (!exists)
		return mb_err_set(err, ENOENT, "no profile '%s': '%s' does not exist",
				  name, ps->path);
	for (size_t i = 0; i < ps->n && used < sizeof(list); i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s",
				 i ? ", " : "", ps->v[i].name);
		if (w > 0)
			used += (size_t)w;
	}
	return mb_err_set(err, ENOENT, "no profile '%s' in '%s' (%s%s)", name,
			  ps->path, ps->n ? "it has: " : "it has none",
			  list);
}

int mb_config_select(const char *name, const char *url, struct mb_profile *p,
		     struct mb_err *err)
{
	char path[4096];
	char *text = NULL;
	const struct seen *s = NULL;
	struct parse ps = { .path = path };
	int r;

	if (!name || !*name) {
		name = getenv("MAINBRELLA_PROFILE");
		if (name && !*name)
			name = NULL;
	}
	if (name && !valid_name(name))
		return mb_err_set(err, EINVAL,
				  "invalid profile name '%s' (letters, digits, '_', '.', '-')",
				  name);
	r = mb_config_path(path, sizeof(path));
	if (r == -ENOENT && !name) {
		memset(p, 0, sizeof(*p));
		return 0;
	}
	if (r)
		return mb_err_set(err, -r, "cannot find the configuration file: %s",
				  r == -ENOENT ? "set HOME or XDG_CONFIG_HOME" : "path too long");
	r = read_config(path, &text, err);
	if (r < 0)
		return r;
	ps.v = calloc(MAX_PROFILES, sizeof(*ps.v));
	if (!ps.v) {
		free(text);
		return mb_err_set(err, ENOMEM, "out of memory");
	}
	if (r == 0)
		r = parse(&ps, text, err);
	else if (!name)
		r = 0;      /* no file, nothing asked for */
	else
		r = missing(&ps, name, 0, err);
	if (r)
		goto out;
	if (name) {
		s = find(&ps, name);
		if (!s) {
			r = missing(&ps, name, 1, err);
			goto out;
		}
	} else {
		s = url ? find_url(&ps, url) : find(&ps, "default");
	}
	if (s)
		*p = s->p;
	else
		memset(p, 0, sizeof(*p));
out:
	free(ps.v);
	free(text);
	return r;
}
