/* agent.c: the mount's local socket (see agent.h): names, sockets, framing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/agent.h"
#include "common/util.h"

int mb_agent_name(char out[MB_AGENT_NAME_MAX])
{
	char hex[33];
	int r = mb_random_hex(hex, 16);

	if (r)
		return r;
	snprintf(out, MB_AGENT_NAME_MAX, "mbfs-agent-%ld-%s", (long)getpid(), hex);
	return 0;
}

/* sun_path[0] = '\0': the abstract namespace; the length says where the
 * name ends (no terminating NUL is part of it). */
static socklen_t address(const char *name, struct sockaddr_un *a)
{
	size_t n = strlen(name);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (n + 1 > sizeof(a->sun_path))
		n = sizeof(a->sun_path) - 1;
	memcpy(a->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int mb_agent_listen(const char *name)
{
	struct sockaddr_un a;
	socklen_t len = address(name, &a);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, len) || listen(fd, 64)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int mb_agent_connect(const char *name)
{
	struct sockaddr_un a;
	socklen_t len = address(name, &a);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, len)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int mb_agent_peer_uid(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t n = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n))
		return -errno;
	*uid = cr.uid;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int mb_agent_send(int fd, const cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);
	unsigned char hdr[4];
	size_t n;
	int r;

	if (!text)
		return -ENOMEM;
	n = strlen(text);
	if (n > MB_AGENT_MSG_MAX) {
		free(text);
		return -E2BIG;
	}
	hdr[0] = (unsigned char)(n >> 24);
	hdr[1] = (unsigned char)(n >> 16);
	hdr[2] = (unsigned char)(n >> 8);
	hdr[3] = (unsigned char)n;
	r = write_all(fd, hdr, 4);
	if (!r)
		r = write_all(fd, text, n);
	free(text);
	return r;
}

int mb_agent_recv(int fd, cJSON **out)
{
	unsigned char hdr[4];
	uint32_t n;
	char *text;
	int r = read_all(fd, hdr, 4);

	if (r)
		return r;
	n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	    (uint32_t)hdr[2] << 8 | hdr[3];
	if (n == 0 || n > MB_AGENT_MSG_MAX)
		return -EPROTO;
	text = malloc(n + 1);
	if (!text)
		return -ENOMEM;
	r = read_all(fd, text, n);
	if (r == -ECONNRESET)
		r = -EPROTO;
	if (!r) {
		text[n] = '\0';
		*out = cJSON_ParseWithLength(text, n);
		if (!*out || !cJSON_IsObject(*out)) {
			cJSON_Delete(*out);
			*out = NULL;
			r = -EPROTO;
		}
	}
	free(text);
	return r;
}
