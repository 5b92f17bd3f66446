/* json.c: checked field access on cJSON trees (see json.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

int mb_json_parse(const char *text, size_t len, cJSON **out, const char *what,
		  struct mb_err *err)
{
	cJSON *o;

	if (!text || len == 0)
		return mb_err_set(err, EPROTO, "%s: empty answer", what);
	if (memchr(text, '\0', len))
		return mb_err_set(err, EPROTO, "%s: answer holds a NUL byte", what);
	o = cJSON_ParseWithLength(text, len);
	if (!o)
		return mb_err_set(err, EPROTO, "%s: answer is not valid JSON", what);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return mb_err_set(err, EPROTO, "%s: answer is not a JSON object", what);
	}
	*out = o;
	return 0;
}

/* U+10FFFF, a noncharacter that command output does not carry. */
#define NUL_ESC "\\uDBFF\\uDFFF"
#define NUL_UTF8 "\xF4\x8F\xBF\xBF"

size_t mb_json_count_nuls(const char *text, size_t len)
{
	size_t i, nuls = 0;

	/* Outside strings valid JSON has no backslash, so a left-to-right
	 * scan that skips each escape pair sees every \u0000 exactly. */
	for (i = 0; text && i + 1 < len; i++) {
		if (text[i] != '\\')
			continue;
		if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0)
			nuls++;
		i++;
	}
	return nuls;
}

int mb_json_parse_keepnul(const char *text, size_t len, cJSON **out,
			  const char *what, struct mb_err *err)
{
	size_t i, n = 0, nuls;
	char *copy;
	int r;

	if (!text)
		return mb_json_parse(text, len, out, what, err);
	nuls = mb_json_count_nuls(text, len);
	if (!nuls)
		return mb_json_parse(text, len, out, what, err);
	copy = malloc(len + nuls * 6 + 1);
	if (!copy)
		return mb_err_set(err, ENOMEM, "out of memory");
	for (i = 0; i < len; i++) {
		if (text[i] == '\\' && i + 1 < len) {
			if (text[i + 1] == 'u' && i + 5 < len &&
			    memcmp(text + i + 2, "0000", 4) == 0) {
				memcpy(copy + n, NUL_ESC, 12);
				n += 12;
				i += 5;
				continue;
			}
			copy[n++] = text[i++];
		}
		copy[n++] = text[i];
	}
	copy[n] = '\0';
	r = mb_json_parse(copy, n, out, what, err);
	free(copy);
	return r;
}

int mb_json_get_bytes(const cJSON *o, const char *key, bool required,
		      char **out, size_t *len, const char *what,
		      struct mb_err *err)
{
	const char *s = NULL, *p;
	size_t n = 0;
	char *b;
	int r = mb_json_get_str(o, key, required, &s, what, err);

	if (r)
		return r;
	if (!s) {
		*out = NULL;
		*len = 0;
		return 0;
	}
	b = malloc(strlen(s) + 1);
	if (!b)
		return mb_err_set(err, ENOMEM, "out of memory");
	for (p = s; *p; ) {
		if ((unsigned char)*p == 0xF4 && strncmp(p, NUL_UTF8, 4) == 0) {
			b[n++] = '\0';
			p += 4;
		} else {
			b[n++] = *p++;
		}
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* The field, or NULL when absent or null (then -EPROTO if required). */
static int field(const cJSON *o, const char *key, bool required,
		 const cJSON **out, const char *what, struct mb_err *err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!f || cJSON_IsNull(f)) {
		*out = NULL;
		if (required)
			return mb_err_set(err, EPROTO, "%s: field '%s' missing",
					  what, key);
		return 0;
	}
	*out = f;
	return 0;
}

static int wrong(const char *key, const char *type, const char *what,
		 struct mb_err *err)
{
	return mb_err_set(err, EPROTO, "%s: field '%s' is not %s", what, key, type);
}

int mb_json_get_str(const cJSON *o, const char *key, bool required,
		    const char **out, const char *what, struct mb_err *err)
{
	const cJSON *f;
	int r = field(o, key, required, &f, what, err);

	if (r || !f)
		return r;
	if (!cJSON_IsString(f) || !f->valuestring)
		return wrong(key, "a string", what, err);
	*out = f->valuestring;
	return 0;
}

int mb_json_get_strbuf(const cJSON *o, const char *key, bool required,
		       char *dst, size_t size, const char *what,
		       struct mb_err *err)
{
	const char *s = NULL;
	int r = mb_json_get_str(o, key, required, &s, what, err);

	if (r || !s)
		return r;
	if (strlen(s) >= size)
		return mb_err_set(err, EPROTO, "%s: field '%s' too long", what, key);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

int mb_json_get_int(const cJSON *o, const char *key, bool required,
		    long long *out, bool *present, const char *what,
		    struct mb_err *err)
{
	const cJSON *f;
	double v;
	int r = field(o, key, required, &f, what, err);

	if (present)
		*present = false;
	if (r || !f)
		return r;
	if (!cJSON_IsNumber(f))
		return wrong(key, "a number", what, err);
	v = f->valuedouble;
	/* no libm: the range check first, then the cast round trip */
	if (!(v >= -9007199254740992.0 && v <= 9007199254740992.0) ||
	    (double)(long long)v != v)
		return wrong(key, "an integer", what, err);
	*out = (long long)v;
	if (present)
		*present = true;
	return 0;
}

int mb_json_get_bool(const cJSON *o, const char *key, bool required,
		     bool *out, const char *what, struct mb_err *err)
{
	const cJSON *f;
	int r = field(o, key, required, &f, what, err);

	if (r || !f)
		return r;
	if (!cJSON_IsBool(f))
		return wrong(key, "a boolean", what, err);
	*out = cJSON_IsTrue(f);
	return 0;
}

int mb_json_get_obj(const cJSON *o, const char *key, bool required,
		    const cJSON **out, const char *what, struct mb_err *err)
{
	const cJSON *f;
	int r = field(o, key, required, &f, what, err);

	if (r || !f)
		return r;
	if (!cJSON_IsObject(f))
		return wrong(key, "an object", what, err);
	*out = f;
	return 0;
}

int mb_json_get_arr(const cJSON *o, const char *key, bool required,
		    const cJSON **out, const char *what, struct mb_err *err)
{
	const cJSON *f;
	int r = field(o, key, required, &f, what, err);

	if (r || !f)
		return r;
	if (!cJSON_IsArray(f))
		return wrong(key, "an array", what, err);
	*out = f;
	return 0;
}
