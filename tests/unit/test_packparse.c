/* test_packparse.c: pack.sh's listing records (fuse/packparse.c). */
#include <errno.h>

#include "fuse/bulk/packparse.h"
#include "tests/unit/unit.h"

/* What the callback saw: the directories, each with its entries. */
struct seen {
	int calls;
	int stop_after;           /* 0: never stop */
	char dirs[16][256];
	struct mb_entry_list lists[16];
};

static int collect(void *ud, const char *rel, struct mb_entry_list *list)
{
	struct seen *s = ud;
	if (s->calls < 16) {
		snprintf(s->dirs[s->calls], sizeof(s->dirs[0]), "%s", rel);
		s->lists[s->calls] = *list;
	} else {
		mb_entry_list_release(list);
	}
	s->calls++;
	return s->stop_after && s->calls == s->stop_after ? 7 : 0;
}

static void seen_release(struct seen *s)
{
	for (int i = 0; i < s->calls && i < 16; i++)
		mb_entry_list_release(&s->lists[i]);
	memset(s, 0, sizeof(*s));
}

static const struct mb_entry *find(const struct seen *s, const char *dir,
				   const char *name)
{
	for (int i = 0; i < s->calls && i < 16; i++)
		if (strcmp(s->dirs[i], dir) == 0)
			for (size_t k = 0; k < s->lists[i].n; k++)
				if (strcmp(s->lists[i].v[k].name, name) == 0)
					return &s->lists[i].v[k];
	return NULL;
}

static int parse(const char *text, size_t len, struct seen *s)
{
	struct mb_err err;
	char *copy = unit_dup(text, len);
	int rc = mbfs_pack_parse(copy, len, collect, s, &err);
	if (rc == -EIO)
		CHECK(err.msg[0]);
	free(copy);
	return rc;
}

/* The real listing (tests/fuzz/seeds/pack/listing, pack.sh on a tree
 * x.txt, a/{y,b/z,L...}, c/{link,fifo}). */
static void real(void)
{
	size_t len;
	char *text = unit_seed("pack/listing", &len);
	struct seen s = { 0 };
	CHECK_INT(parse(text, len, &s), 0);
	CHECK_INT(s.calls, 4);
	CHECK_STR(s.dirs[0], "");
	CHECK_STR(s.dirs[1], "a");
	CHECK_STR(s.dirs[2], "a/b");
	CHECK_STR(s.dirs[3], "c");
	CHECK_INT(s.lists[0].n, 3);
	CHECK_INT(s.lists[1].n, 3);
	CHECK_INT(s.lists[2].n, 1);
	CHECK_INT(s.lists[3].n, 2);
	const struct mb_entry *e = find(&s, "a", "y");
	CHECK(e && e->type == MB_FT_FILE && e->size == 5 &&
	      e->mtime == 1700000000 && e->mode == 0644);
	e = find(&s, "c", "link");
	CHECK(e && e->type == MB_FT_SYMLINK && e->link_target &&
	      strcmp(e->link_target, "../x.txt") == 0);
	e = find(&s, "c", "fifo");
	CHECK(e && e->type == MB_FT_FIFO);
	e = find(&s, "", "a");
	CHECK(e && e->type == MB_FT_DIR);
	seen_release(&s);

	/* cut at every byte: whole records parse, anything else is -EIO
	 * and nothing is handed on */
	size_t boundaries = 0;
	for (size_t k = 0; k < len; k++) {
		int nul = 0;
		for (size_t i = 0; i < k; i++)
			nul += text[i] == '\0';
		int rc = parse(text, k, &s);
		if (nul % 9 == 0 && (k == 0 || text[k - 1] == '\0')) {
			boundaries++;
			CHECK_INT(rc, 0);
		} else {
			CHECK_INT(rc, -EIO);
			CHECK_INT(s.calls, 0);
		}
		seen_release(&s);
	}
	CHECK(boundaries > 5);

	/* one flipped bit anywhere: parsed or refused, never a crash */
	for (size_t k = 0; k < len; k++) {
		for (int b = 0; b < 8; b++) {
			text[k] ^= (char)(1 << b);
			int rc = parse(text, len, &s);
			CHECK(rc == 0 || rc == -EIO);
			seen_release(&s);
			text[k] ^= (char)(1 << b);
		}
	}
	free(text);
}

#define REC(y, m, u, g, sz, t, d, n, l) \
	y "\0" m "\0" u "\0" g "\0" sz "\0" t "\0" d "\0" n "\0" l "\0"

static int one(const char *rec, size_t len)
{
	struct seen s = { 0 };
	int rc = parse(rec, len, &s);
	seen_release(&s);
	return rc;
}

#define ONE(lit) one(lit, sizeof(lit) - 1)

static void bad(void)
{
	/* the daemon's crash: a record refused before its first field
	 * was even taken (parse_item() returned before its memset) */
	CHECK_INT(ONE("garbage"), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", ".", "a", "")
		      "garbage\n"), -EIO);
	CHECK_INT(ONE(REC("ff", "644", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("?", "644", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("", "644", "0", "0", "1", "1", ".", "a", "")), -EIO);
	/* numbers: digits only, in range */
	CHECK_INT(ONE(REC("f", "8", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "17777", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "-1", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", " 644", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "", "0", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "4294967296", "0", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "-1", "1", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "18446744073709551616", "1", ".",
			  "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "9223372036854775808", "1", ".",
			  "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1x", "1", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1e5", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1.", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", ".5", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1.2.3", ".", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "99999999999999999999", ".",
			  "a", "")), -EIO);
	/* names and directories: plain, below the root, not staging */
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", ".", "", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", ".", ".", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", ".", "..", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", ".", "a/b", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "..", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "./..", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "./a/../b", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "/etc", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "./", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "./a//b", "a", "")), -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "./.mbfs-up-1", "a", "")),
		  -EIO);
	CHECK_INT(ONE(REC("f", "644", "0", "0", "1", "1", "", "a", "")), -EIO);
	/* overlong fields and names */
	char big[9000];
	memset(big, 'n', sizeof(big));
	memcpy(big, "f\0" "644\0" "0\0" "0\0" "1\0" "1\0" ".\0", 14);
	CHECK_INT(one(big, sizeof(big)), -EIO);
	big[14 + 300] = '\0';
	big[14 + 301] = '\0';
	CHECK_INT(one(big, 14 + 302), -EIO);       /* a 300-byte name */
	/* a missing terminator on the last field */
	CHECK_INT(one(REC("f", "644", "0", "0", "1", "1", ".", "a", "x"),
		      sizeof(REC("f", "644", "0", "0", "1", "1", ".", "a", "x")) - 2),
		  -EIO);
}

static void good(void)
{
	struct seen s = { 0 };
	static const char t[] =
		REC("d", "755", "0", "0", "4096", "-1.5", ".", "d", "")
		REC("l", "777", "1", "2", "3", "0", "./d", "l", "t")
		REC("f", "4755", "4294967295", "0", "9223372036854775807",
		    "1.000", "./d", "f", "")
		REC("f", "644", "0", "0", "1", "1", "./d", "\xff", "");
	CHECK_INT(parse(t, sizeof(t) - 1 - sizeof(REC("f", "644", "0", "0",
		  "1", "1", "./d", "\xff", "")) + 1, &s), 0);
	/* find's %T@ gives the second, then the nanoseconds after it: -1.5
	 * is half a second before the epoch */
	const struct mb_entry *e = find(&s, "", "d");
	CHECK(e && e->mtime == -1 && e->mtime_nsec == 500000000L &&
	      e->mtime_exact);
	e = find(&s, "d", "f");
	CHECK(e && e->mode == 04755 && e->uid == 4294967295u &&
	      e->size == 9223372036854775807ull && e->mtime == 1 &&
	      e->mtime_nsec == 0 && e->mtime_exact);
	e = find(&s, "d", "l");
	CHECK(e && e->link_target && strcmp(e->link_target, "t") == 0);
	seen_release(&s);
	/* a name that is not UTF-8 is handed on with the rest of its
	 * directory (the cache's name rule drops it) */
	CHECK_INT(parse(t, sizeof(t) - 1, &s), 0);
	CHECK_INT(s.calls, 2);
	CHECK_STR(s.dirs[0], "");
	CHECK_STR(s.dirs[1], "d");
	CHECK(find(&s, "d", "\xff") != NULL && find(&s, "d", "f") != NULL);
	seen_release(&s);
	/* fn's non-zero return stops the walk and is returned */
	s.stop_after = 1;
	CHECK_INT(parse(t, sizeof(t) - 1, &s), 7);
	CHECK_INT(s.calls, 1);
	seen_release(&s);
	/* nothing at all: the root, empty */
	CHECK_INT(parse("", 0, &s), 0);
	CHECK_INT(s.calls, 1);
	CHECK_INT(s.lists[0].n, 0);
	seen_release(&s);
}

int main(void)
{
	real();
	bad();
	good();
	return unit_end("packparse");
}
