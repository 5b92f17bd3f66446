/* create.h: `mbfs --create`: start a container, keyed and resumable.
 *
 * The Idempotency-Key, the API URL and the request body are saved (0600)
 * under $XDG_STATE_HOME/mbfs/ (or ~/.local/state/mbfs/) before the first
 * POST, and the file is locked (flock) while this process works on it. The
 * same request is repeated about once a second for up to 120 s while the
 * answer is ambiguous: a lost connection, any 5xx (the service may have
 * started the container before failing), a 429 other than a monthly quota,
 * or a creation still "starting"; the service answers a repeated key with
 * the same creation for 24 h. The identity is used only once "running" and
 * confirmed in the container list. The saved file is removed when the
 * outcome is known. When it is not (still unresolved after 120 s, or mbfs
 * was killed meanwhile), the next `mbfs --create` with the same URL and
 * options resumes that key instead of starting another container; a key
 * whose creation has stopped (409 creation_no_longer_running) is dropped
 * and a new one made. Never deletes a container by guesswork. A service
 * that no attempt reached (DNS, refused connections) fails after the
 * retries of one request, and its key is dropped: nothing was started.
 */
#ifndef MBFS_CREATE_H
#define MBFS_CREATE_H

#include "common/api.h"

/* 0 with *out, or -errno with a one-line message in err that says what
 * failed on its own ("cannot create a container: ..."): print it as is. */
int mbfs_create_container(struct mb_client *c, const char *api_url,
			  const char *catalog, const char *size,
			  struct mb_ident *out, struct mb_err *err);

#endif
