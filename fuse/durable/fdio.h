/* fdio.h: whole preads and pwrites of local files. No locks, no state. */
#ifndef MBFS_FDIO_H
#define MBFS_FDIO_H

#include <stddef.h>
#include <stdint.h>

/* pread / pwrite all n bytes at off, restarting on EINTR. 0 or -errno
 * (-EIO for a file shorter than expected). */
int mbfs_pread_all(int fd, void *p, size_t n, uint64_t off);
int mbfs_pwrite_all(int fd, const void *p, size_t n, uint64_t off);

#endif
