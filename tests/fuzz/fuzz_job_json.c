/* fuzz_job_json.c: the service's JSON answers (common/json.c and the
 * execution decoder of common/api_jobs.c, as an exec result's fields). */
#include "common/api_core.h"
#include "common/json.h"
#include "tests/fuzz/fuzz.h"

FUZZ_TEXT(s, n)
{
	struct mb_err err;
	struct mb_job j;
	cJSON *doc = NULL;
	char *out = NULL;
	size_t len;
	bool b;
	if (!mb_json_parse(s, n, &doc, "fuzz", &err)) {
		mb_job_parse(doc, &j, "fuzz", &err);
		cJSON_Delete(doc);
	}
	if (!mb_json_parse_keepnul(s, n, &doc, "fuzz", &err)) {
		if (!mb_json_get_bytes(doc, "stdout", false, &out, &len, "fuzz",
				       &err))
			free(out);
		mb_json_get_bool(doc, "timedOut", false, &b, "fuzz", &err);
		cJSON_Delete(doc);
	}
}
