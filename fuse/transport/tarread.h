/* tarread.h: reading the members of a tar archive held in a local file:
 * ustar headers, GNU long names ('L'), numbers in octal or base-256, as
 * GNU tar writes them (pack.sh). Trusts nothing: a header whose checksum
 * is wrong, or a member that runs past the end, ends the walk. Names come
 * as stored; the caller decides what they may mean. No threads, no locks,
 * no network.
 */
#ifndef MBFS_TARREAD_H
#define MBFS_TARREAD_H

#include <stdint.h>
#include <time.h>

#include "common/err.h"

struct mbfs_tar_member {
	const char *name;      /* NUL-terminated, as stored (the long name
	                          when there is one) */
	char type;             /* '0' (or NUL): a regular file; others as tar */
	uint64_t size;         /* bytes of data */
	time_t mtime;
	uint64_t off;          /* where the data starts in the file */
};

/* Call fn for each member of the archive in fd ([0, len)) until its end
 * marker; a non-zero return of fn stops the walk and is returned. 0 at
 * the end marker (or at len on a block boundary), -EIO when the archive
 * is damaged or cut short (the members before were passed), -ENOMEM; err
 * says which header and what was wrong with it. Logs nothing. */
int mbfs_tar_walk(int fd, uint64_t len,
		  int (*fn)(void *ud, const struct mbfs_tar_member *m),
		  void *ud, struct mb_err *err);

#endif
