/* copyfd.c: the fd of a node's local copy, read without the node's lock
 * and closed or replaced once no such read uses it (node_int.h). */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "fuse/mbfs.h"
#include "fuse/node/node_int.h"

void mbfs_node_fd_init(struct mbfs_node *n)
{
	/* a storm of reads must not hold off the follow that waits */
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&n->fd_rw, &a);
	pthread_rwlockattr_destroy(&a);
}

void mbfs_node_fd_destroy(struct mbfs_node *n)
{
	pthread_rwlock_destroy(&n->fd_rw);
}

void mbfs_node_set_fd(struct mbfs_node *n, int fd)
{
	pthread_rwlock_wrlock(&n->fd_rw);
	if (n->fd >= 0)
		close(n->fd);
	n->fd = fd;
	pthread_rwlock_unlock(&n->fd_rw);
}

int mbfs_node_pread(int fd, char *buf, size_t size, off_t off)
{
	size_t done = 0;
	while (done < size) {
		ssize_t r = pread(fd, buf + done, size - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (int)done;
}

int mbfs_node_pread_ready(struct mbfs *fs, struct mbfs_node *n, char *buf,
			  size_t size, off_t off)
{
	int got = -EAGAIN;
	pthread_rwlock_rdlock(&n->fd_rw);
	pthread_mutex_lock(&fs->nodes_lock);
	bool ready = n->loaded && !n->partial && !n->recheck;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (ready)
		got = mbfs_node_pread(n->fd, buf, size, off);
	pthread_rwlock_unlock(&n->fd_rw);
	return got;
}
