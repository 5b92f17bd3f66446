/* json.h (internal to common/): checked field access on cJSON trees.
 *
 * Answers from the service are parsed with these helpers so that unknown
 * fields are ignored and a missing required field or a wrong type gives
 * -EPROTO with a message naming the field ("<what>: field 'size' is not a
 * number"). Trees belong to whoever parsed them (cJSON_Delete()).
 * Optional fields that are absent or null leave *out untouched and set
 * *present (when given) to false.
 */
#ifndef MB_JSON_H
#define MB_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "common/err.h"

/* Parse text as a JSON object. On success *out is the tree (caller frees).
 * A NUL byte in text is -EPROTO: JSON has none (a string says \u0000),
 * and cJSON would keep one inside a string, cutting it there. */
int mb_json_parse(const char *text, size_t len, cJSON **out, const char *what,
		  struct mb_err *err);

/* Like mb_json_parse(), but a NUL inside a string (\u0000, which cJSON
 * would cut the string at) survives as U+10FFFF; read such fields back with
 * mb_json_get_bytes(). For command output, which may hold NUL bytes. */
int mb_json_parse_keepnul(const char *text, size_t len, cJSON **out,
			  const char *what, struct mb_err *err);

/* How many \u0000 escapes (NULs inside strings) text holds. */
size_t mb_json_count_nuls(const char *text, size_t len);

/* String field as bytes: *out is malloc'd (caller frees), NUL-terminated
 * after *len bytes, with the NULs kept by mb_json_parse_keepnul() restored.
 * Absent or null and not required: *out = NULL, *len = 0. */
int mb_json_get_bytes(const cJSON *o, const char *key, bool required,
		      char **out, size_t *len, const char *what,
		      struct mb_err *err);

/* String field; *out borrows from the tree. */
int mb_json_get_str(const cJSON *o, const char *key, bool required,
		    const char **out, const char *what, struct mb_err *err);

/* String field copied into dst[size]; too long gives -EPROTO. */
int mb_json_get_strbuf(const cJSON *o, const char *key, bool required,
		       char *dst, size_t size, const char *what,
		       struct mb_err *err);

/* Integral number field (rejects fractions and values beyond 2^53). */
int mb_json_get_int(const cJSON *o, const char *key, bool required,
		    long long *out, bool *present, const char *what,
		    struct mb_err *err);

int mb_json_get_bool(const cJSON *o, const char *key, bool required,
		     bool *out, const char *what, struct mb_err *err);

/* Object or array field; *out borrows from the tree. */
int mb_json_get_obj(const cJSON *o, const char *key, bool required,
		    const cJSON **out, const char *what, struct mb_err *err);
int mb_json_get_arr(const cJSON *o, const char *key, bool required,
		    const cJSON **out, const char *what, struct mb_err *err);

#endif
