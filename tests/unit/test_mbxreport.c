/* test_mbxreport.c: the guest's "@mbx ..." reports (shim/guest.c). */
#include <errno.h>

#include "shim/guest.h"
#include "tests/unit/unit.h"

static int parse(const char *text, size_t len, struct mbx_report *rep)
{
	char *c = unit_dup(text, len);
	int rc = mbx_report_parse(c, len, rep);
	if (rc == 0)
		mbx_report_release(rep);
	free(c);
	return rc;
}

#define PARSE(lit, rep) parse(lit, sizeof(lit) - 1, rep)

static void real(void)
{
	size_t len;
	struct mbx_report rep;
	char *t = unit_seed("mbx_report/done", &len);
	CHECK_INT(mbx_report_parse(t, len, &rep), 0);
	CHECK_INT(rep.state, MBX_ST_DONE);
	CHECK_INT(rep.rc, 0);
	CHECK_INT(rep.out_len, 12);
	CHECK(rep.out_data && memcmp(rep.out_data, "hello\nworld\n", 12) == 0);
	CHECK_INT(rep.err_len, 5);
	CHECK(rep.complete);
	mbx_report_release(&rep);
	/* cut anywhere: refused, or a report whose header came whole */
	for (size_t k = 0; k < len; k++) {
		int rc = parse(t, k, &rep);
		CHECK(rc == 0 || rc == -EPROTO);
		if (k < 30)
			CHECK_INT(rc, -EPROTO);
	}
	free(t);
	t = unit_seed("mbx_report/running", &len);
	CHECK_INT(mbx_report_parse(t, len, &rep), 0);
	CHECK_INT(rep.state, MBX_ST_RUNNING);
	CHECK_INT(rep.out_size, 7);
	CHECK(!rep.complete);
	mbx_report_release(&rep);
	free(t);
	t = unit_seed("mbx_report/fail", &len);
	CHECK_INT(mbx_report_parse(t, len, &rep), 0);
	CHECK_INT(rep.state, MBX_ST_FAIL);
	CHECK_STR(rep.fail, "supervisor");
	free(t);
}

static void bad(void)
{
	struct mbx_report rep;
	CHECK_INT(PARSE("", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx what\n", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0\n@e\n@end\n", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0 0 9\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	CHECK_INT(PARSE("@mbx done 256 1 0 0 0 1 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	CHECK_INT(PARSE("@mbx done - 1 0 0 0 1 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 -1 0 0 0 1 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 99999999999999999999 0 0 0 1 0 0\nYQ==\n"
			"@e\n@end\n", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 -5 0 1 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	/* ON says 2, the data holds 1 */
	CHECK_INT(PARSE("@mbx done 0 2 0 0 0 2 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	/* no @e, no @end, bad base64 */
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0 0\nYQ==\n@end\n", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0 0\nYQ==\n@e\n", &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0 0\n!!!!\n@e\n@end\n", &rep),
		  -EPROTO);
	/* the header split over two lines */
	CHECK_INT(PARSE("@mbx done 0 1 0 0\n0 1 0 0\nYQ==\n@e\n@end\n", &rep),
		  -EPROTO);
	char big[600] = "@mbx done ";
	memset(big + 10, '1', sizeof(big) - 11);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(parse(big, strlen(big), &rep), -EPROTO);
	CHECK_INT(PARSE("@mbx done 0 1 0 0 0 1 0 0\nYQ==\n@e\n@end\n", &rep), 0);
	CHECK_INT(PARSE("@mbx ack cut\n", &rep), 0);
}

int main(void)
{
	real();
	bad();
	return unit_end("mbxreport");
}
