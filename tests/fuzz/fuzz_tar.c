/* fuzz_tar.c: the tar walk of bulk reads (fuse/tarread.c). */
#include <sys/mman.h>
#include <unistd.h>

#include "fuse/transport/tarread.h"
#include "tests/fuzz/fuzz.h"

static int take(void *ud, const struct mbfs_tar_member *m)
{
	*(size_t *)ud += strlen(m->name);
	return 0;
}

FUZZ_TEXT(s, n)
{
	static int fd = -1;
	struct mb_err err;
	size_t names = 0;
	if (fd < 0 && (fd = memfd_create("tar", 0)) < 0)
		abort();
	if (ftruncate(fd, 0) || pwrite(fd, s, n, 0) != (ssize_t)n)
		abort();
	mbfs_tar_walk(fd, n, take, &names, &err);
}
