/* cred.c: the API key (environment or a private key file) and the base URL
 * rule (https, or http only for loopback). The key never reaches a message. */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/cred.h"

#define KEY_MAX 4096

void mb_cred_free_key(char *key)
{
	if (!key)
		return;
	explicit_bzero(key, strlen(key));
	free(key);
}

/* A key is "mb_" and 64 hex digits; a session token the 64 digits alone
 * (contract §1.1). Anything else would go out as a bearer only to be
 * refused, and may be a secret of another kind (a file named by mistake). */
static bool key_shaped(const char *s, size_t n)
{
	if (n == 67 && memcmp(s, "mb_", 3) == 0) {
		s += 3;
		n -= 3;
	}
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* Copy s trimmed of surrounding whitespace; -EINVAL when empty or when it
 * holds a control character (a key is one token), -EBADMSG when that token
 * is not shaped as a key. */
static int trimmed_key(const char *s, size_t n, char **out)
{
	size_t i;
	char *k;

	while (n && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (!n)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] == 0x7f)
			return -EINVAL;
	if (!key_shaped(s, n))
		return -EBADMSG;
	k = malloc(n + 1);
	if (!k)
		return -ENOMEM;
	memcpy(k, s, n);
	k[n] = '\0';
	*out = k;
	return 0;
}

static int read_key_file(const char *path, char **out, struct mb_err *err)
{
	char buf[KEY_MAX + 1];
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd, r;

	/* a symlinked key file is fine: the mode of its target is checked */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return mb_err_set(err, errno, "cannot open key file '%s': %s",
				  path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = mb_err_set(err, errno, "cannot stat key file '%s': %s",
			       path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = mb_err_set(err, EINVAL, "key file '%s' is not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		r = mb_err_set(err, EPERM,
			       "key file '%s' is accessible by group or others (mode %04o): run 'chmod 600 %s'",
			       path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	if (st.st_uid != geteuid()) {
		r = mb_err_set(err, EPERM,
			       "key file '%s' is not owned by you: run 'chown %u %s'",
			       path, (unsigned)geteuid(), path);
		goto out;
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = mb_err_set(err, errno, "cannot read key file '%s': %s",
				       path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > KEY_MAX) {
		r = mb_err_set(err, EINVAL, "key file '%s' is too large to hold a key", path);
		goto out;
	}
	r = trimmed_key(buf, len, out);
	if (r == -EINVAL)
		r = mb_err_set(err, EINVAL,
			       "key file '%s' does not hold one key on one line", path);
	else if (r == -EBADMSG)
		r = mb_err_set(err, EINVAL, "key file '%s' does not hold a "
			       "Mainbrella API key ('mb_' and 64 hex digits)", path);
	else if (r)
		r = mb_err_set(err, -r, "cannot load key file '%s'", path);
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return r;
}

/* Take the key out of the environment, so that neither /proc/PID/environ
 * nor a child process ever sees it. unsetenv() alone only unlinks the
 * entry: its bytes stay in the initial environment block that
 * /proc/PID/environ shows, so they are wiped first (every copy: execve
 * may pass the name twice). */
static void forget_env_key(void)
{
	static const char name[] = "MAINBRELLA_API_KEY=";

	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, sizeof(name) - 1) == 0)
			explicit_bzero(*e + sizeof(name) - 1,
				       strlen(*e + sizeof(name) - 1));
	unsetenv("MAINBRELLA_API_KEY");
}

/* A profile's key_file: the error says where it was named. */
static int read_profile_key(const struct mb_profile *p, char **key_out,
			    struct mb_err *err)
{
	char msg[sizeof(err->msg)];
	int r = read_key_file(p->key_file, key_out, err);

	if (r) {
		snprintf(msg, sizeof(msg), "%s", err->msg);
		r = mb_err_set(err, -r, "%s (key_file of profile '%s', %s)",
			       msg, p->name, p->key_file_at);
	}
	return r;
}

int mb_cred_load_key_for(const char *key_file, const struct mb_profile *p,
			 char **key_out, struct mb_err *err)
{
	const char *env = getenv("MAINBRELLA_API_KEY");
	const char *home;
	char path[4096];
	int r;

	if (!key_file && env && *env) {
		r = trimmed_key(env, strlen(env), key_out);
		forget_env_key();
		if (r == -EINVAL)
			return mb_err_set(err, EINVAL,
					  "MAINBRELLA_API_KEY is not a single token");
		if (r == -EBADMSG)
			return mb_err_set(err, EINVAL, "MAINBRELLA_API_KEY is not "
					  "a Mainbrella API key ('mb_' and 64 hex "
					  "digits)");
		if (r)
			return mb_err_set(err, -r, "cannot load the API key");
		return 0;
	}
	/* an explicit key file wins; the variable goes all the same */
	forget_env_key();
	if (!key_file) {
		key_file = getenv("MAINBRELLA_API_KEY_FILE");
		if (key_file && !*key_file)
			key_file = NULL;
	}
	if (key_file)
		return read_key_file(key_file, key_out, err);
	if (p && p->key_file[0])
		return read_profile_key(p, key_out, err);
	home = getenv("HOME");
	if (!home || !*home)
		return mb_err_set(err, ENOKEY,
				  "no API key: set MAINBRELLA_API_KEY or MAINBRELLA_API_KEY_FILE");
	snprintf(path, sizeof(path), "%s/.config/mainbrella/api-key", home);
	if (access(path, F_OK) != 0)
		return mb_err_set(err, ENOKEY,
				  "no API key: set MAINBRELLA_API_KEY, MAINBRELLA_API_KEY_FILE, a profile's key_file or create '%s' (mode 600)",
				  path);
	return read_key_file(path, key_out, err);
}

int mb_cred_load_key(const char *key_file, char **key_out, struct mb_err *err)
{
	return mb_cred_load_key_for(key_file, NULL, key_out, err);
}

/* 1 when host (without port, brackets kept for IPv6) is a loopback name. */
static int is_loopback(const char *host, size_t n)
{
	char h[256];
	int dots = 0;
	size_t i;

	if (n == 0 || n >= sizeof(h))
		return 0;
	memcpy(h, host, n);
	h[n] = '\0';
	if (strcasecmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0)
		return 1;
	if (strncmp(h, "127.", 4) != 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (h[i] == '.')
			dots++;
		else if (!isdigit((unsigned char)h[i]))
			return 0;
	}
	return dots == 3;
}

int mb_cred_api_url_for(const char *url, const struct mb_profile *p,
			char **url_out, struct mb_err *err)
{
	const char *rest, *host, *host_end;
	size_t n;
	char *u;

	if (!url) {
		url = getenv("MAINBRELLA_API_URL");
		if (!url || !*url)
			url = p && p->url[0] ? p->url : MB_DEFAULT_API_URL;
	}
	n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (n >= 512)
		return mb_err_set(err, EINVAL, "API URL too long");
	if (strncasecmp(url, "https://", 8) == 0)
		rest = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		rest = url + 7;
	else
		return mb_err_set(err, EINVAL,
				  "invalid API URL '%.*s': it must start with https://",
				  (int)n, url);
	host = rest;
	if (*host == '[') {
		host_end = strchr(host, ']');
		if (!host_end)
			return mb_err_set(err, EINVAL, "invalid API URL '%.*s'", (int)n, url);
		host_end++;
	} else {
		host_end = host + strcspn(host, ":/?#");
	}
	if (host_end == host || strpbrk(url, " \t\r\n@?#") ||
	    (size_t)(host_end - url) > n)
		return mb_err_set(err, EINVAL, "invalid API URL '%.*s'", (int)n, url);
	if (rest == url + 7 && !is_loopback(host, (size_t)(host_end - host)))
		return mb_err_set(err, EINVAL,
				  "refusing plain http:// to '%.*s': use https:// (http is allowed only for 127.0.0.1, localhost and [::1])",
				  (int)(host_end - host), host);
	u = strndup(url, n);
	if (!u)
		return mb_err_set(err, ENOMEM, "out of memory");
	*url_out = u;
	return 0;
}

int mb_cred_api_url(const char *url, char **url_out, struct mb_err *err)
{
	return mb_cred_api_url_for(url, NULL, url_out, err);
}
