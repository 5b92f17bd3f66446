/* warm.c: what the kernel may skip for an open handle, and the requests
 * counted (see warm.h). */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/mbfs.h"

#include <fuse.h>

#include "fuse/face/warm.h"

struct mbfs_warm {
	atomic_uint_fast64_t ops[MBFS_OP_COUNT];
};

static const char *const op_names[MBFS_OP_COUNT] = {
	[MBFS_OP_GETATTR] = "getattr",
	[MBFS_OP_OPEN] = "open",
	[MBFS_OP_READ] = "read",
	[MBFS_OP_FLUSH] = "flush",
	[MBFS_OP_RELEASE] = "release",
	[MBFS_OP_OPENDIR] = "opendir",
	[MBFS_OP_READDIR] = "readdir",
	[MBFS_OP_RELEASEDIR] = "releasedir",
};

struct mbfs_warm *mbfs_warm_new(void)
{
	struct mbfs_warm *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	for (int i = 0; i < MBFS_OP_COUNT; i++)
		atomic_init(&w->ops[i], 0);
	return w;
}

void mbfs_warm_free(struct mbfs_warm *w)
{
	free(w);
}

void mbfs_warm_count(struct mbfs_warm *w, enum mbfs_warm_op op)
{
	if (w)
		atomic_fetch_add_explicit(&w->ops[op], 1, memory_order_relaxed);
}

char *mbfs_warm_json(struct mbfs_warm *w)
{
	char buf[32 * MBFS_OP_COUNT + 4];
	size_t n = 0;
	buf[n++] = '{';
	for (int i = 0; i < MBFS_OP_COUNT; i++) {
		unsigned long long v = 0;
		if (w)
			v = atomic_load_explicit(&w->ops[i],
						 memory_order_relaxed);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"%s\":%llu",
				      i ? "," : "", op_names[i], v);
	}
	snprintf(buf + n, sizeof(buf) - n, "}");
	return strdup(buf);
}

void mbfs_warm_open(struct mbfs *fs, int flags, struct fuse_file_info *fi)
{
	(void)fs;
	/* O_TRUNC empties the copy even with O_RDONLY (node.h): that handle
	 * has something to upload at close. A handle that only reads leaves
	 * any upload to the writers' closes and to the last release */
	if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC))
		fi->noflush = 1;
}
