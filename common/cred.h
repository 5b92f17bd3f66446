/* cred.h: where the API key and base URL come from.
 *
 * Key: $MAINBRELLA_API_KEY, else the file named by $MAINBRELLA_API_KEY_FILE
 * (or the key_file argument), else ~/.config/mainbrella/api-key. A key file
 * must be a regular file not readable or writable by group/others (0600 or
 * 0400), else it is refused. Surrounding whitespace is trimmed.
 * URL: $MAINBRELLA_API_URL, default https://api.mainbrella.com; plain http://
 * only for loopback hosts (127.0.0.0/8, localhost, [::1]); no trailing '/'.
 * The key is never put in an error message.
 */
#ifndef MB_CRED_H
#define MB_CRED_H

#include "err.h"

#define MB_DEFAULT_API_URL "https://api.mainbrella.com"

/* key_file: explicit file (an option), or NULL for the default chain.
 * On success *key_out is malloc'd; free it with mb_cred_free_key().
 * MAINBRELLA_API_KEY leaves the environment (and its bytes are wiped from
 * the process's initial environment block), used or not: call this before
 * starting threads or children. */
int mb_cred_load_key(const char *key_file, char **key_out, struct mb_err *err);

/* Wipe and free a key. */
void mb_cred_free_key(char *key);

/* url: explicit (an option) or NULL for $MAINBRELLA_API_URL / the default.
 * Validates the scheme rule; *url_out is malloc'd without trailing '/'. */
int mb_cred_api_url(const char *url, char **url_out, struct mb_err *err);

#endif
