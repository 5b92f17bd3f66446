/* name.c: which names the mount can hand to the guest, and which names of
 * the guest it shows (see name.h).
 *
 * The listing rule logs each dropped name once: a bad server or a hostile
 * sandbox would otherwise fill the log at every readdir. What was said is
 * a fixed table of hashes of (directory, name, reason) under seen_lock;
 * once it is full, one line says that later names go unreported.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/api.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/util.h"
#include "fuse/mbfs.h"
#include "fuse/transport/name.h"

#define SEEN_MAX 4096   /* a power of two; filled to three quarters */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_MAX];     /* protected by seen_lock; 0: free */
static size_t nseen;                /* protected by seen_lock */
static bool seen_full;              /* protected by seen_lock */

int mbfs_name_check(const char *path)
{
	int rc = 0;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n > MBFS_NAME_MAX)
			return -ENAMETOOLONG;   /* whatever its bytes */
		if (!mb_utf8_valid(p, n))
			rc = -EILSEQ;
		p += n + (p[n] == '/');
	}
	return rc;
}

int mbfs_name_check_target(const char *target)
{
	return mb_utf8_valid(target, strlen(target)) ? 0 : -EILSEQ;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Is name, in directory dir, reserved? */
static bool reserved_in(const char *dir, const char *name)
{
	return has_prefix(name, MBFS_PRIVATE_PREFIX) ||
	       has_prefix(name, MBFS_HIDDEN_PREFIX) ||
	       (strcmp(dir, "/") == 0 && strcmp(name, MB_CONTROL_NAME) == 0);
}

bool mbfs_name_reserved(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	bool root = !slash || slash == path;
	return reserved_in(root ? "/" : "", name);
}

/* name for a log line: at most max bytes of it, control bytes and '\'
 * escaped (a name must not forge a line of the log). */
static void quote(const char *name, bool cut, size_t max, char *out,
		  size_t size)
{
	size_t n = 0, left = strlen(name);
	for (const char *p = name; *p && n + 8 < size; ) {
		unsigned char c = (unsigned char)*p;
		if ((size_t)(p - name) >= max) {
			n += (size_t)snprintf(out + n, size - n, "...");
			break;
		}
		/* the log stays UTF-8: a stray byte is shown, not written */
		size_t len = c < 0x80 ? 1 : mb_utf8_seq_len((const unsigned char *)p,
							    left - (size_t)(p - name));
		if (c < 0x20 || c == 0x7f || c == '\\' || len == 0) {
			n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
			p++;
		} else if (n + len + 8 < size) {
			memcpy(out + n, p, len);
			n += len;
			p += len;
		} else {
			break;
		}
	}
	out[n] = '\0';
	if (cut && n + 8 < size)
		snprintf(out + n, size - n, "\\x00...");
}

int mbfs_name_check_new(const char *path)
{
	int rc = mbfs_name_check(path);
	if (rc || !mbfs_name_reserved(path) ||
	    strcmp(path, "/" MB_CONTROL_NAME) == 0)
		return rc;
	char q[320];
	quote(path, false, 256, q, sizeof(q));
	mb_log(MB_LOG_WARN, "cannot make '%s': names beginning '"
	       MBFS_PRIVATE_PREFIX "' or '" MBFS_HIDDEN_PREFIX "' are "
	       "reserved for mbfs (EPERM)", q);
	return -EPERM;
}

/* Is name one that mbfs itself puts on the guest: /tmp/.mbfs-up, or
 * .mbfs-XX- followed by the 16 hex digits of mb_random_hex(8)? */
static bool ours(const char *name)
{
	if (!has_prefix(name, MBFS_PRIVATE_PREFIX))
		return false;
	const char *p = name + strlen(MBFS_PRIVATE_PREFIX);
	if (strcmp(p, "up") == 0)
		return true;
	return strlen(p) == 19 && p[0] >= 'a' && p[0] <= 'z' &&
	       p[1] >= 'a' && p[1] <= 'z' && p[2] == '-' &&
	       strspn(p + 3, "0123456789abcdef") == 16;
}

/* true the first time (dir, name, why) is asked about. */
static bool first_time(const char *dir, const char *name, const char *why)
{
	uint64_t h = mbfs_fnv1a(MBFS_FNV_OFFSET, dir);
	h = mbfs_fnv1a(mbfs_fnv1a(h, "\x01"), name);
	h = mbfs_fnv1a(mbfs_fnv1a(h, "\x01"), why);
	h = h ? h : 1;
	bool first = false, full_now = false;
	pthread_mutex_lock(&seen_lock);
	size_t i = (size_t)h & (SEEN_MAX - 1);
	while (seen[i] && seen[i] != h)
		i = (i + 1) & (SEEN_MAX - 1);
	if (!seen[i] && nseen < SEEN_MAX / 4 * 3) {
		seen[i] = h;
		nseen++;
		first = true;
	} else if (!seen[i] && !seen_full) {
		seen_full = full_now = true;
	}
	pthread_mutex_unlock(&seen_lock);
	if (full_now)
		mb_log(MB_LOG_WARN, "more names dropped from listings than can "
		       "be remembered: later ones are not reported");
	return first;
}

/* Why e cannot be shown after prev (the last entry kept), or NULL. */
static const char *impossible(const struct mb_entry *e, const char *prev)
{
	const char *nm = e->name;
	if (e->name_cut)
		return "it holds a NUL byte";
	if (!nm[0])
		return "it is empty";
	if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
		return "no directory entry has that name";
	if (strchr(nm, '/'))
		return "it holds a '/'";
	if (strlen(nm) > MBFS_NAME_MAX)
		return "it is longer than 255 bytes";
	if (!mb_utf8_valid(nm, strlen(nm)))
		return "it is not UTF-8, which the API cannot name";
	if (prev && strcmp(prev, nm) == 0)
		return "it is listed twice";
	return NULL;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct mb_entry *)a)->name,
		      ((const struct mb_entry *)b)->name);
}

void mbfs_name_filter(const char *dir, struct mb_entry_list *list)
{
	char q[96], qd[320];
	size_t m = 0;
	if (list->n > 1)
		qsort(list->v, list->n, sizeof(*list->v), by_name);
	for (size_t i = 0; i < list->n; i++) {
		struct mb_entry *e = &list->v[i];
		const char *why = impossible(e, m ? list->v[m - 1].name : NULL);
		bool quiet = false;
		if (!why && reserved_in(dir, e->name)) {
			why = "the name is reserved for mbfs";
			quiet = ours(e->name);   /* an upload of ours */
		}
		if (!why) {
			list->v[m++] = *e;
			continue;
		}
		if (quiet || first_time(dir, e->name, why)) {
			quote(dir, false, 256, qd, sizeof(qd));
			quote(e->name, e->name_cut, 64, q, sizeof(q));
			mb_log(quiet ? MB_LOG_DEBUG : MB_LOG_WARN, "listing of "
			       "'%s': not showing '%s': %s", qd, q, why);
		}
		mb_entry_release(e);
	}
	list->n = m;
}
