/* prefetch.h: bulk reads of small files, and of the listings of a walk.
 *
 * When a program reads the files of a directory one after the other
 * (grep -r, git add, cp -r, an editor's project scan), the directory's
 * small files (at most MBFS_PREFETCH_FILE_MAX) come in one archive built
 * on the guest (fuse/guest/pack.sh: one exec, then its 1 MiB pieces with
 * parallel GETs; the next exec, or unmount, removes them) instead of one
 * GET each.
 * Each member becomes a clean copy in the data cache (data.h), keyed by
 * the (size, mtime) in its header: a later open takes it only while the
 * guest still reports that size and mtime, so a file changed since is
 * fetched alone, and correctness never depends on the archive being
 * fresh. A file open or queued here (node.h) is never replaced by the
 * archive's copy; nor is one whose mtime is not older than the walk (it
 * may change again within the same second).
 *
 * An archive that holds every small file of its subtree also brings the
 * listings of the subtree's directories, stored in the attribute cache as
 * list requests' would be (pack.h), so the walk that follows asks for
 * none.
 *
 * Only where it pays: the first cold read in a directory costs its one
 * GET; a second within MBFS_PREFETCH_WINDOW_MS archives the directory's
 * subtree. A tree walk escalates: when the directory's sibling (or its
 * parent's sibling) was archived within the window, that second cold read
 * archives the parent's (grandparent's) subtree instead, minus the
 * subtrees already archived whole. Cold reads under a subtree archived whole within the window
 * never trigger; those under one being archived wait for it. An archive
 * stops at MBFS_PREFETCH_BYTES or MBFS_PREFETCH_FILES (the triggering
 * directory's own files first).
 *
 * Errors are never fatal: one log line, and reads go one file at a time.
 * Thread-safe; the module's lock is a leaf, never held across I/O.
 */
#ifndef MBFS_PREFETCH_H
#define MBFS_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

struct mbfs;
struct mbfs_prefetch;

#define MBFS_PREFETCH_FILE_MAX (256u * 1024u)
#define MBFS_PREFETCH_BYTES (8u * 1024u * 1024u)
#define MBFS_PREFETCH_FILES 4000u
#define MBFS_PREFETCH_WINDOW_MS 5000u
#define MBFS_PREFETCH_LS_MAX (4u * 1024u * 1024u)  /* pack.sh's cap */

/* What a bulk read must leave alone: a path whose local copy is the
 * mount's own (open or queued: the node layer says, nodeset.h). */
typedef bool (*mbfs_prefetch_ours_fn)(struct mbfs *fs, const char *path);

struct mbfs_prefetch *mbfs_prefetch_new(mbfs_prefetch_ours_fn ours);
/* When no read waits any more (unmount). NULL is fine. */
void mbfs_prefetch_free(struct mbfs_prefetch *p);
/* At unmount, while the service answers: remove the last archive's
 * pieces from the guest's /tmp (the next archive would have). */
void mbfs_prefetch_stop(struct mbfs *fs);

/* A read of the small file path (size bytes; mount-relative) found no
 * clean copy. Notes it; when that makes a bulk read worth it, archives
 * (on this thread) the directory or an ancestor into the data cache; when
 * an archive covering path is in flight, waits for it. 1 when the caller
 * should look for a clean copy again, 0 when it should read the file
 * alone. May be called with a node's lock held (no other lock). */
int mbfs_prefetch_miss(struct mbfs *fs, const char *path, uint64_t size);

/* The listing of dir (mount-relative) is about to be fetched, for a
 * readdir (readdir true) or a lookup in it: the cache has none, and the
 * caller knows dir is not queued (mbfs_view_made_here). When that makes a walk (a sibling was listed cold
 * within MBFS_PREFETCH_WINDOW_MS: find, ls -R, git add, git status, a
 * project scan; going down one path by lookups never does, by a third
 * readdir below a directory that is not the root does: rm -rf, du), the
 * parent's (or that directory's) whole subtree is listed in one go
 * (pack.sh with no file: one exec, its listings in the answer or in
 * pieces) into the cache, on this thread; a listing under a walk in flight waits for it. Either way
 * the caller then lists dir through the cache, which may have it now. A
 * subtree whose listings pass MBFS_PREFETCH_LS_MAX is listed directory by
 * directory, as before. */
void mbfs_prefetch_listing(struct mbfs *fs, const char *dir, bool readdir);

/* List dir (and what is below it, within MBFS_PREFETCH_LS_MAX) with one
 * pack.sh now, walk or not, into the cache: for a directory whose list
 * route page fails because a name in it is not UTF-8 (the listing drops
 * just that name, name.h). On this thread; failures are logged. */
void mbfs_prefetch_listing_now(struct mbfs *fs, const char *dir);

/* dir was just listed again after a command (relist.h): a cold listing
 * as far as walks go, so that a walk right after a command (find, ls -R)
 * still takes a subtree in one go when it comes to a directory that was
 * not listed again. */
void mbfs_prefetch_relisted(struct mbfs *fs, const char *dir);

/* The mount was told to forget what it knows (mbexec's invalidate): what
 * was walked or listed a moment ago may be walked again at once. */
void mbfs_prefetch_forget(struct mbfs *fs);

#endif
