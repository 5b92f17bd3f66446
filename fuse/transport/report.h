/* report.h: what the guest scripts print (split.sh, pack.sh, statfs.sh,
 * apply.sh, sha256sum), checked and decoded. Pure: no mount state, no I/O, no
 * threads, no logging; each parser fills a struct mb_err naming what it
 * did not understand (never the text itself), and the caller logs it.
 */
#ifndef MBFS_REPORT_H
#define MBFS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/err.h"

/* The decimal numbers of s, one a line (empty lines skipped), to its end:
 * *v (malloc'd, also when *n is 0: the caller frees it) and *n. 0, or
 * -ENOMEM or -EIO with *v NULL and *n 0: -EIO when a line is not one
 * number of at most 2^63 - 1 or there are more than max. */
int mbfs_xfer_numbers(const char *s, size_t max, uint64_t **v, size_t *n);

/* split.sh's first line, "SIZE INODE MTIME" (decimal, single spaces):
 * its length in *len (the stamp a later round repeats) and SIZE in *size.
 * 0, or -EIO when out does not start with such a line. */
int mbfs_report_cut_head(const char *out, size_t *len, uint64_t *size,
			 struct mb_err *err);

/* pack.sh's report ("NOW FILES CUT LISTBYTES", then the piece sizes). */
struct mbfs_pack_report {
	time_t now;            /* the guest's clock before the walk */
	uint64_t files;        /* files archived */
	bool cut;              /* the caps left some out */
	uint64_t ls;           /* bytes of listings ending the pieces */
	uint64_t *sizes;       /* malloc'd, n of them */
	size_t n;
	uint64_t total;        /* their sum */
};

/* Decode out into *r (zeroed first; release r->sizes with free() whatever
 * the return). 0, -ENOMEM, or -EIO when out is not such a report: a bad
 * head line, a size line that is not one number, more than max pieces,
 * a total past max_total or below LISTBYTES, pieces with no file nor
 * listing, or none with some. */
int mbfs_report_pack(const char *out, size_t max, uint64_t max_total,
		     struct mbfs_pack_report *r, struct mb_err *err);

/* statfs.sh's two `df -P` outputs (blocks of 1K, then inodes, which may
 * be missing) as a statvfs: *sv zeroed first. Header lines are skipped;
 * a data line is "NAME BLOCKS USED AVAIL ...". 0, or -EIO when there is
 * no data line or one with a number that does not fit. */
int mbfs_report_df(const char *out, struct statvfs *sv, struct mb_err *err);

/* sha256sum's line "HEX  PATH" in out[0, len) (or "\HEX  ESCAPED-PATH"):
 * its 64 lowercase hex digits into hex (NUL-ended). 0, or -EIO when out
 * does not start with them and a space. */
int mbfs_report_sha256(const char *out, size_t len, char hex[65],
		       struct mb_err *err);

/* apply.sh's report: "z I WHY" per removal or move not done, "w I" per
 * move between two names of one file (rename(2) leaves both), "y I WHY"
 * per directory not made, "x I WHY" per file not put in place, then "ok
 * COUNT". fn(ud, kind, I, why, whylen) for each w, x, y or z line (why not NUL-ended, may be empty); a non-zero return of fn
 * (I out of range) makes the report bad. 0 with *count, or -EIO when a
 * line is not understood, fn refused one, or "ok" is missing, not last or
 * bad. */
int mbfs_report_apply(const char *out,
		      int (*fn)(void *ud, char kind, uint64_t i,
				const char *why, size_t whylen),
		      void *ud, uint64_t *count, struct mb_err *err);

#endif
