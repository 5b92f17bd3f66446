/* pack.h: what fuse/guest/pack.sh sends besides file contents: the names
 * of its members, checked before they become mount paths, and the
 * listings of the directories it walked, which go to the attribute cache
 * as a list request's would. No network, no threads of its own.
 */
#ifndef MBFS_PACK_H
#define MBFS_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mbfs;
struct mb_err;

/* base + "/" + rel (a member name, "./" prefixes allowed) into out
 * (MB_PATH_MAX), or false when rel is not a plain relative path below
 * base: empty, absolute, with an empty, "." or ".." component, or one
 * of mbfs's own names (name.h). Never trust the archive. */
bool mbfs_pack_path(const char *base, const char *rel, char *out);

/* The listings text[0, len) (pack.sh's records, fuse/packparse.h) of
 * base and the directories below it: each stored with
 * mbfs_cache_put_listing (unless the write counter moved from ctr), which
 * drops a name the list route could not return (not UTF-8). 0, or
 * -EIO with err saying which record is not understood (nothing stored),
 * -ENOMEM. Logs nothing. */
int mbfs_pack_listings(struct mbfs *fs, const char *base, const char *text,
		       size_t len, uint64_t ctr, struct mb_err *err);

#endif
