/* fuzz_pack.c: pack.sh's listing records (fuse/packparse.c). */
#include "fuse/bulk/packparse.h"
#include "tests/fuzz/fuzz.h"

static int drop(void *ud, const char *rel, struct mb_entry_list *list)
{
	(void)ud;
	(void)rel;
	mb_entry_list_release(list);
	return 0;
}

FUZZ_TEXT(s, n)
{
	struct mb_err err;
	mbfs_pack_parse(s, n, drop, NULL, &err);
}
