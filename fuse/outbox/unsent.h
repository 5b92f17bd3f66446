/* unsent.h: what a mount could not send, told at the next contact.
 *
 * A plain `fusermount3 -u` (or umount, or a desktop's eject) returns before
 * the daemon has finished: it still sends what is queued, and what it
 * cannot send stays in the journal (the sandbox did not answer) or goes
 * under kept/ (refused). Nobody is there to read a message then, so at its
 * end the daemon writes CACHE_DIR/unsent.json (to a temporary name,
 * fsync'ed, renamed) when anything is not on the sandbox:
 *   {"id","createdAt","apiUrl","root","mountpoint","endedAt",
 *    "pendingFiles","pendingDirs","pendingBytes","pendingPaths":[mount
 *    paths, the first MBFS_UNSENT_PATHS],"failedFiles","lastError",
 *    "kept":[{"path","file","reason"}],"keptDir"}
 * and removes an older one otherwise. The next mount of that cache
 * directory prints it (stderr, or the log) before it replays the journal,
 * and carries it in its control file as "unsent" (with "warned": whether
 * mbexec has warned about it yet), so `mbfs --status` shows it and mbexec
 * warns once; that mount's own end replaces or removes the file.
 * Two mounts of one container at once share the file: the last to end
 * writes it. Thread-safe.
 */
#ifndef MBFS_UNSENT_H
#define MBFS_UNSENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/ident.h"

struct mbfs;

#define MBFS_UNSENT_NAME "unsent.json"
#define MBFS_UNSENT_PATHS 20
/* the control file's line after which mbexec stops warning */
#define MBFS_UNSENT_SEEN MB_CONTROL_UNSENT_SEEN

/* At mount (fs->cache_dir set): take the record an ended mount left, if
 * any, and print it (mb_log, so on the terminal before daemonising). */
void mbfs_unsent_take(struct mbfs *fs);
/* At the daemon's end, after the queue stopped: write the record, or
 * remove the old one when everything is on the sandbox. */
void mbfs_unsent_save(struct mbfs *fs);
/* The taken record with "warned" for the control file (malloc'd JSON),
 * or NULL when there is none. */
char *mbfs_unsent_json(struct mbfs *fs);
/* mbexec has warned (MBFS_UNSENT_SEEN). */
void mbfs_unsent_seen(struct mbfs *fs);
/* Free what mbfs_unsent_take took. */
void mbfs_unsent_release(struct mbfs *fs);

/* Print rec (such a record) for a person, each line starting with
 * prefix: with head, which mount and when it ended; what stayed pending,
 * what was kept and where. unsent_print.c; no mount state. */
/* The kept files of a record's or a control file's "kept" list, the
 * first few with where and why, then how many more under kept_dir. */
void mbfs_unsent_print_kept(FILE *out, const cJSON *kept, const char *prefix,
			    const char *kept_dir);
void mbfs_unsent_print(FILE *out, const cJSON *rec, const char *prefix,
		       bool head);
/* Files the record says are not on the sandbox (pending and kept). */
int mbfs_unsent_count(const cJSON *rec);

#endif
