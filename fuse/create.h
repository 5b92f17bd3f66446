/* create.h: `mbfs --create`: start a container, keyed and resumable.
 *
 * The Idempotency-Key and request body are saved (0600) under
 * $XDG_STATE_HOME/mbfs/ (or ~/.local/state/mbfs/) before the first POST;
 * the same request is repeated about once a second for up to 120 s while
 * the answer is a transport error, a 503 or a creation still "starting".
 * The identity is used only once "running" and confirmed in the container
 * list. The saved file is removed when the outcome is known; an ambiguous
 * outcome is an error naming it. Never deletes a container by guesswork.
 */
#ifndef MBFS_CREATE_H
#define MBFS_CREATE_H

#include "common/api.h"

/* 0 with *out, or -errno with a one-line message in err. */
int mbfs_create_container(struct mb_client *c, const char *catalog,
			  const char *size, struct mb_ident *out,
			  struct mb_err *err);

#endif
