/* fuzz_report.c: the guest scripts' reports (fuse/report.c); FUZZ_WHICH
 * picks the parser, one binary each (Makefile). */
#include "fuse/transport/report.h"
#include "tests/fuzz/fuzz.h"

static int mark(void *ud, char kind, uint64_t i, const char *why,
		size_t whylen)
{
	(void)kind;
	(void)why;
	*(size_t *)ud += whylen;
	return i > 100;
}

FUZZ_TEXT(s, n)
{
	struct mb_err err;
	uint64_t u, *v;
	size_t len = n;
	struct mbfs_pack_report r;
	struct statvfs sv;
	switch (FUZZ_WHICH) {
	case 0:
		if (!mbfs_xfer_numbers(s, 1000, &v, &len))
			free(v);
		break;
	case 1:
		mbfs_report_cut_head(s, &len, &u, &err);
		break;
	case 2:
		mbfs_report_pack(s, 24, 20u << 20, &r, &err);
		free(r.sizes);
		break;
	case 3:
		mbfs_report_df(s, &sv, &err);
		break;
	default:
		mbfs_report_apply(s, mark, &len, &u, &err);
		break;
	}
}
