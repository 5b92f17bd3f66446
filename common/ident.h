/* ident.h: container identity and the mount's control file.
 *
 * A container is addressed by its slot id ("small", "c1"...) and the exact
 * generation createdAt ("2026-10-05T12:00:00.000Z"); every guest call sends
 * both. The control file MOUNTPOINT/.mainbrella is JSON:
 *   {"apiUrl":..., "id":..., "createdAt":..., "root":"/workspace",
 *    "mountpoint":"/home/u/sb", "pid":1234, "version":"0.1.0",
 *    "expiresAt":"2026-10-05T13:00:00.000Z", "agent":"mbfs-agent-..."}
 * expiresAt (the generation's hard deadline) is left out when unknown;
 * agent names the mount's local socket for mbexec (agent.h), left out by a
 * mount that offers none.
 * It never holds the API key. Writing the line MB_CONTROL_SYNC to it makes
 * the mount push what it still holds back (the write returns once done, or
 * fails with EIO); writing MB_CONTROL_INVALIDATE tells it that a command has
 * finished and its caches must go.
 */
#ifndef MB_IDENT_H
#define MB_IDENT_H

#include <sys/types.h>
#include "err.h"

#define MB_VERSION "0.1.0"
#define MB_CONTROL_NAME ".mainbrella"
#define MB_CONTROL_INVALIDATE "invalidate\n"
/* Written before a command: the mount flushes pending metadata batches. */
#define MB_CONTROL_SYNC "sync\n"
/* Written by mbexec once it has warned about the "unsent" record of an
 * ended mount (fuse/unsent.h): the mount notes it, mbexec says no more. */
#define MB_CONTROL_UNSENT_SEEN "unsent-seen\n"

#define MB_ID_MAX 16
#define MB_GEN_MAX 40
#define MB_URL_MAX 512
#define MB_PATH_MAX 4096
#define MB_AGENT_NAME_MAX 64

struct mb_ident {
	char id[MB_ID_MAX];        /* "small" or "c1".."c499" */
	char created_at[MB_GEN_MAX];
};

struct mb_control {
	char api_url[MB_URL_MAX];
	struct mb_ident ident;
	char root[MB_PATH_MAX];        /* remote directory mounted, e.g. /workspace */
	char mountpoint[MB_PATH_MAX];  /* absolute local path */
	long pid;
	char version[32];
	char expires_at[MB_GEN_MAX];   /* hard deadline; "" when unknown */
	char agent[MB_AGENT_NAME_MAX]; /* the mount's socket; "" when none */
};

/* 1 when id is "small" or "c1".."c499". */
int mb_ident_valid_id(const char *id);

/* Parse "CONTAINER[@GENERATION][:REMOTE_DIR]" (the first ":/" separates the
 * directory, since a generation contains colons). gen_out/dir_out are set
 * to "" when absent. 0 or -EINVAL with a message in err that quotes spec
 * and says which part is wrong (a relative directory, an unknown id). */
int mb_ident_parse_spec(const char *spec, struct mb_ident *out,
			char dir_out[MB_PATH_MAX], struct mb_err *err);

/* Serialise c as one JSON object + "\n"; malloc'd, caller frees. NULL on OOM. */
char *mb_control_format(const struct mb_control *c);

/* Parse JSON text (unknown fields ignored, wrong types rejected). */
int mb_control_parse(const char *json, size_t len, struct mb_control *out,
		     struct mb_err *err);

/* Read and parse the control file at path. 0 or -errno. */
int mb_control_read(const char *path, struct mb_control *out, struct mb_err *err);

/* Find the mount containing the local directory dir: walk up from dir until
 * DIR/.mainbrella can be read (stopping at "/"). On success fills c and
 * writes the path of dir relative to the mount root into rel_out
 * ("" at the root, else "sub/dir"). -ENOENT when no mount contains dir. */
int mb_control_find(const char *dir, struct mb_control *c,
		    char rel_out[MB_PATH_MAX], struct mb_err *err);

#endif
