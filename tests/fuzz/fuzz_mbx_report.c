/* fuzz_mbx_report.c: the guest's "@mbx ..." reports with base64
 * (shim/guest.c). */
#include "shim/guest.h"
#include "tests/fuzz/fuzz.h"

FUZZ_TEXT(s, n)
{
	struct mbx_report rep;
	if (!mbx_report_parse(s, n, &rep))
		mbx_report_release(&rep);
}
