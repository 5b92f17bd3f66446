/* cred.h: where the API key and base URL come from.
 *
 * Key: the key_file argument (an option), else $MAINBRELLA_API_KEY, else
 * the file named by $MAINBRELLA_API_KEY_FILE, else the profile's key_file
 * (config.h), else ~/.config/mainbrella/api-key. A key file
 * must be a regular file not readable or writable by group/others (0600 or
 * 0400), else it is refused. Surrounding whitespace is trimmed.
 * URL: the url argument (an option), else $MAINBRELLA_API_URL, else the
 * profile's url, else https://api.mainbrella.com; plain http://
 * only for loopback hosts (127.0.0.0/8, localhost, [::1]); no trailing '/'.
 * The key is never put in an error message.
 */
#ifndef MB_CRED_H
#define MB_CRED_H

#include "err.h"

#define MB_DEFAULT_API_URL "https://api.mainbrella.com"

struct mb_profile;

/* key_file: explicit file (an option), or NULL for the default chain.
 * On success *key_out is malloc'd; free it with mb_cred_free_key().
 * MAINBRELLA_API_KEY leaves the environment (and its bytes are wiped from
 * the process's initial environment block), used or not: call this before
 * starting threads or children. */
int mb_cred_load_key(const char *key_file, char **key_out, struct mb_err *err);

/* The same, with profile p (may be NULL) below the environment. An error
 * about the profile's key file names the profile and its FILE:LINE. */
int mb_cred_load_key_for(const char *key_file, const struct mb_profile *p,
			 char **key_out, struct mb_err *err);

/* Wipe and free a key. */
void mb_cred_free_key(char *key);

/* url: explicit (an option) or NULL for $MAINBRELLA_API_URL / the default.
 * Validates the scheme rule; *url_out is malloc'd without trailing '/'. */
int mb_cred_api_url(const char *url, char **url_out, struct mb_err *err);

/* The same, with profile p (may be NULL) below $MAINBRELLA_API_URL. */
int mb_cred_api_url_for(const char *url, const struct mb_profile *p,
			char **url_out, struct mb_err *err);

#endif
