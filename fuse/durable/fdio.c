/* fdio.c: whole preads and pwrites of local files (fdio.h). */
#include <errno.h>
#include <unistd.h>

#include "fuse/durable/fdio.h"

int mbfs_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;
	while (n) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int mbfs_pread_all(int fd, void *p, size_t n, uint64_t off)
{
	char *c = p;
	while (n) {
		ssize_t r = pread(fd, c, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		c += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}
