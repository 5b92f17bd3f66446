/* packparse.h: the listing records pack.sh appends to its pieces, parsed
 * into one listing per directory walked. Pure: no mount state, no I/O, no
 * threads; fuse/pack.c stores what it hands back.
 */
#ifndef MBFS_PACKPARSE_H
#define MBFS_PACKPARSE_H

#include <stddef.h>

#include "common/api.h"
#include "common/err.h"

/* The longest record field taken: a directory field is a guest path. */
#define MBFS_PACK_FIELD_MAX 4096u

/* Called once for each directory walked: rel is "" for the walk's root,
 * else a plain relative path ("a/b": no ".", "..", empty component or
 * upload staging). list is taken: fn releases or keeps it. A non-zero
 * return stops the walk and is returned. */
typedef int (*mbfs_pack_dir_fn)(void *ud, const char *rel,
				struct mb_entry_list *list);

/* Parse text[0, len): whole records of 9 NUL-ended fields (pack.sh's
 * header comment). Only when every record parses is fn called, for each
 * directory walked (the root and every directory entry) in strcmp order
 * of rel, with the entries whose directory field names it (none: empty);
 * a name that is not UTF-8 is handed on too (the cache's name rule drops
 * it; a directory of that name is not walked). 0, fn's non-zero return, -ENOMEM,
 * or -EIO with err naming the first record not understood (a bad type,
 * number, name or directory field, a field past MBFS_PACK_FIELD_MAX, a
 * record cut short); fn is then never called. Never logs. */
int mbfs_pack_parse(const char *text, size_t len, mbfs_pack_dir_fn fn,
		    void *ud, struct mb_err *err);

#endif
