/* test_report.c: the guest scripts' reports (fuse/report.c). */
#include <errno.h>
#include <stdint.h>

#include "fuse/transport/report.h"
#include "tests/unit/unit.h"

static void numbers(void)
{
	uint64_t *v;
	size_t n;
	CHECK_INT(mbfs_xfer_numbers("1048576\n1048576\n902848\n", 8, &v, &n), 0);
	CHECK_INT(n, 3);
	CHECK_INT(v[2], 902848);
	free(v);
	CHECK_INT(mbfs_xfer_numbers("", 8, &v, &n), 0);
	CHECK_INT(n, 0);
	free(v);
	CHECK_INT(mbfs_xfer_numbers("\n\n5\n\n", 8, &v, &n), 0);
	CHECK_INT(n, 1);
	free(v);
	static const char *const bad[] = {
		"1\nx\n", "-1\n", "1 2\n", "18446744073709551616\n",
		"9223372036854775808\n", " 1\n", "1\r\n", "0x10\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = (uint64_t *)1;
		CHECK_INT(mbfs_xfer_numbers(bad[i], 8, &v, &n), -EIO);
		CHECK(v == NULL);
	}
	CHECK_INT(mbfs_xfer_numbers("1\n2\n3\n", 2, &v, &n), -EIO);
	CHECK_INT(mbfs_xfer_numbers("9223372036854775807\n", 2, &v, &n), 0);
	free(v);
}

static void cut(void)
{
	size_t len, l;
	uint64_t size;
	struct mb_err err;
	char *out = unit_seed("report_cut/split", &len);
	CHECK_INT(mbfs_report_cut_head(out, &l, &size, &err), 0);
	CHECK_INT(size, 3000000);
	CHECK_INT(out[l], '\n');
	/* every cut of the first line short of its last digit still
	 * reads as a line of three numbers or is refused */
	for (size_t k = 0; k < l; k++) {
		char *c = unit_dup(out, k);
		int rc = mbfs_report_cut_head(c, &l, &size, &err);
		CHECK(rc == 0 || rc == -EIO);
		free(c);
	}
	CHECK_INT(mbfs_report_cut_head(out, &l, &size, &err), 0);
	free(out);
	static const char *const bad[] = {
		"", "\n", "1 2\n", "1 2 3 4\n", "-1 2 3\n", "1  2 3\n",
		"99999999999999999999 1 1\n", "a b c\n", NULL,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(mbfs_report_cut_head(bad[i], &l, &size, &err), -EIO);
}

static int pack(const char *out, struct mbfs_pack_report *r)
{
	struct mb_err err;
	int rc = mbfs_report_pack(out, 24, 20u << 20, r, &err);
	if (rc == -EIO)
		CHECK(err.msg[0]);
	return rc;
}

static void pack_report(void)
{
	size_t len;
	struct mbfs_pack_report r;
	char *out = unit_seed("report_pack/files", &len);
	CHECK_INT(pack(out, &r), 0);
	CHECK_INT(r.files, 4);
	CHECK_INT(r.cut, 0);
	CHECK_INT(r.ls, 511);
	CHECK_INT(r.n, 1);
	CHECK_INT(r.total, 6655);
	free(r.sizes);
	for (size_t k = 0; k < len; k++) {
		char *c = unit_dup(out, k);
		int rc = pack(c, &r);
		CHECK(rc == 0 || rc == -EIO);
		free(r.sizes);
		free(c);
	}
	free(out);
	out = unit_seed("report_pack/listings", &len);
	CHECK_INT(pack(out, &r), 0);
	CHECK_INT(r.files, 0);
	free(r.sizes);
	free(out);
	CHECK_INT(pack("1796167948 0 1 0\n", &r), 0);     /* nothing */
	CHECK_INT(r.n, 0);
	free(r.sizes);
	static const char *const bad[] = {
		"", NULL, "1 2 3\n", "1 2 2 0\n5\n", "1 -2 0 0\n",
		"1 1 0 0\n", "1 0 0 0\n5\n", "1 1 0 10\n5\n",
		"1 1 0 0\n5\nx\n", "1 1 0 0\n99999999\n",
		"1 1 0 0\n9223372036854775807\n9223372036854775807\n",
		"99999999999999999999 1 0 0\n5\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(pack(bad[i], &r), -EIO);
		free(r.sizes);
	}
	char many[256] = "1 1 0 0\n";
	for (int i = 0; i < 25; i++)
		strcat(many, "1\n");
	CHECK_INT(pack(many, &r), -EIO);
	free(r.sizes);
}

static void df(void)
{
	size_t len;
	struct statvfs sv;
	struct mb_err err;
	char *out = unit_seed("report_df/statfs", &len);
	CHECK_INT(mbfs_report_df(out, &sv, &err), 0);
	CHECK_INT(sv.f_blocks, 264212084);
	CHECK_INT(sv.f_bavail, 83689296);
	CHECK_INT(sv.f_files, 16777216);
	CHECK_INT(sv.f_ffree, 16364022);
	for (size_t k = 0; k < len; k++) {
		char *c = unit_dup(out, k);
		int rc = mbfs_report_df(c, &sv, &err);
		CHECK(rc == 0 || rc == -EIO);
		free(c);
	}
	free(out);
	/* inodes missing; a name with a space */
	CHECK_INT(mbfs_report_df("Filesystem 1024-blocks Used Available "
				 "Capacity Mounted on\nmy fs 10 2 8 20% /\n",
				 &sv, &err), 0);
	CHECK_INT(sv.f_blocks, 10);
	CHECK_INT(sv.f_files, 0);
	static const char *const bad[] = {
		"", NULL, "Filesystem 1024-blocks Used Available\n",
		"x 1 2\n", "x -1 2 3 4% /\n",
		"x 99999999999999999999 2 3 4% /\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(mbfs_report_df(bad[i], &sv, &err), -EIO);
}

struct marks {
	int w, x, y, z;
	char why[64];
};

static int mark(void *ud, char kind, uint64_t i, const char *why,
		size_t whylen)
{
	struct marks *m = ud;
	if (i >= 3)
		return -1;
	kind == 'w' ? m->w++ : kind == 'x' ? m->x++ : kind == 'y' ? m->y++
							      : m->z++;
	snprintf(m->why, sizeof(m->why), "%.*s", (int)whylen, why);
	return 0;
}

static int apply(const char *out, struct marks *m, uint64_t *count)
{
	struct mb_err err;
	memset(m, 0, sizeof(*m));
	int rc = mbfs_report_apply(out, mark, m, count, &err);
	if (rc == -EIO)
		CHECK(err.msg[0]);
	return rc;
}

static void apply_report(void)
{
	size_t len;
	struct marks m;
	uint64_t count;
	char *out = unit_seed("report_apply/apply", &len);
	CHECK_INT(apply(out, &m, &count), 0);
	CHECK_INT(count, 3);
	CHECK_INT(m.x, 1);
	CHECK_INT(m.y, 2);
	CHECK_STR(m.why, "its directory could not be made");
	/* cut short: the "ok" line is gone or cut */
	for (size_t k = 0; k + 1 < len; k++) {
		char *c = unit_dup(out, k);
		int rc = apply(c, &m, &count);
		CHECK(rc == -EIO || (rc == 0 && k == len - 1));
		free(c);
	}
	free(out);
	CHECK_INT(apply("ok 0\n", &m, &count), 0);
	CHECK_INT(apply("x 1\nok 2", &m, &count), 0);
	CHECK_STR(m.why, "");
	/* a removal refused, then a file: both told */
	CHECK_INT(apply("z 0 Directory not empty\nx 1 gone\nok 2\n", &m, &count), 0);
	CHECK_INT(m.z, 1);
	CHECK_INT(m.x, 1);
	/* a move between two names of one file, which stay: told */
	CHECK_INT(apply("w 2\nok 0\n", &m, &count), 0);
	CHECK_INT(m.w, 1);
	static const char *const bad[] = {
		"", NULL, "ok\n", "ok -1\n", "ok 1x\n", "x 9 gone\nok 1\n",
		"x -1 no\nok 1\n", "v 1 what\nok 1\n", "ok 1\nx 0 late\n",
		"w 7\nok 0\n",
		"x 99999999999999999999 a\nok 1\n", "x1 a\nok 1\n",
		"ok 1\nok 1\n", "garbage\nok 1\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(apply(bad[i], &m, &count), -EIO);
}

static void sha256(void)
{
	static const char good[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934"
		"ca495991b7852b855  /workspace/a b\n";
	char hex[65];
	struct mb_err err;
	CHECK_INT(mbfs_report_sha256(good, sizeof(good) - 1, hex, &err), 0);
	CHECK_INT(strlen(hex), 64);
	CHECK_INT(hex[63], '5');
	for (size_t k = 0; k < 65; k++)
		CHECK_INT(mbfs_report_sha256(good, k, hex, &err), -EIO);
	char bad[sizeof(good)];
	memcpy(bad, good, sizeof(good));
	bad[10] = 'G';
	CHECK_INT(mbfs_report_sha256(bad, sizeof(bad) - 1, hex, &err), -EIO);
	memcpy(bad, good, sizeof(good));
	bad[64] = 'x';
	CHECK_INT(mbfs_report_sha256(bad, sizeof(bad) - 1, hex, &err), -EIO);
	CHECK_INT(mbfs_report_sha256(NULL, 0, hex, &err), -EIO);
	bad[0] = '\\';
	memcpy(bad + 1, good, sizeof(good) - 1);
	CHECK_INT(mbfs_report_sha256(bad, sizeof(bad) - 1, hex, &err), 0);
	CHECK_INT(hex[0], 'e');
}

int main(void)
{
	sha256();
	numbers();
	cut();
	pack_report();
	df();
	apply_report();
	return unit_end("report");
}
