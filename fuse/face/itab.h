/* itab.h: the kernel's inodes: the number each name was given, how often
 * the kernel was told it, and the path it stands for now.
 *
 * The kernel names a file by a node number; the modules below name it by
 * its path. This table is the one place that maps one to the other. A
 * rename through the mount moves the number with the name (what a program
 * holds open keeps its inode); a name removed or replaced leaves its node
 * nameless for as long as the kernel knows the number: such a node has no
 * path, and answers from the attributes it last had (a directory removed
 * while a shell stands in it, an fd held on it). A file removed or
 * replaced while open is renamed to a hidden name instead (ll.c), as
 * libfuse's high-level API did, and keeps its path.
 *
 * Node numbers are never reused in a mount. The root is 1. Thread-safe:
 * one lock, held across no call out but mbfs_itab_lend_fh's hold; the
 * tree locks below are waited for on it.
 */
#ifndef MBFS_ITAB_H
#define MBFS_ITAB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct mbfs_itab;

/* An empty table (the root only), or NULL without memory. */
struct mbfs_itab *mbfs_itab_new(void);
void mbfs_itab_free(struct mbfs_itab *t);

/* Tree locks: what a request names by path stays that path until it is
 * done, as libfuse's high-level API kept it. A request reads the paths
 * of up to two nodes (read[]: each and every node above it may not be
 * renamed or removed meanwhile) and may change up to two names (wdir[] +
 * wname[]: the node so named, if any, is taken alone: no request goes
 * through it meanwhile). 0 in read[] or a NULL wname[] is none. A request
 * that changes no name lets one waiting to change a name go first. */
struct mbfs_itab_locks {
	uint64_t read[2];
	uint64_t wdir[2];
	const char *wname[2];
	/* set by mbfs_itab_lock: the nodes taken, as they were then (a
	 * request may move or unname them before it lets go) */
	uint64_t wino[2];
	uint64_t *chain, inl[24];
	size_t nchain;
};
/* Wait until the set can be taken, then take it. 0, -ESTALE for a read[]
 * node unknown, or -ENOMEM (nothing is taken then). */
int mbfs_itab_lock(struct mbfs_itab *t, struct mbfs_itab_locks *l);
/* Let go of what mbfs_itab_lock took. */
void mbfs_itab_unlock(struct mbfs_itab *t, struct mbfs_itab_locks *l);

/* The path of ino, "/name" appended when name is not NULL, into buf
 * (MB_PATH_MAX). 0, -ESTALE (a node no longer named, or unknown) or
 * -ENAMETOOLONG. */
int mbfs_itab_path(struct mbfs_itab *t, uint64_t ino, const char *name,
		   char *buf);
/* The parent of ino (ino for the root); 0 when it has none (removed). */
uint64_t mbfs_itab_parent(struct mbfs_itab *t, uint64_t ino);

/* The kernel is told that parent/name (parent itself when name is NULL)
 * has attributes st: its node, made if new, counts one more lookup.
 * Returns its number, 0 without memory. */
uint64_t mbfs_itab_looked_up(struct mbfs_itab *t, uint64_t parent,
			     const char *name, const struct stat *st);
/* The kernel forgot n lookups of ino. */
void mbfs_itab_forget(struct mbfs_itab *t, uint64_t ino, uint64_t n);

/* The node named parent/name, 0 when none. */
uint64_t mbfs_itab_find(struct mbfs_itab *t, uint64_t parent, const char *name);
/* The node of a mount path ("/a/b"), 0 when the kernel holds none. */
uint64_t mbfs_itab_find_path(struct mbfs_itab *t, const char *path);
/* true when parent/name is a node some fd holds open. */
bool mbfs_itab_is_open(struct mbfs_itab *t, uint64_t parent, const char *name);

/* parent/name is now newparent/newname; what newname named loses its
 * name. hidden: the move is a hiding (ll.c): the node's last close
 * removes it. */
void mbfs_itab_rename(struct mbfs_itab *t, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname, bool hidden);
/* The two names swap nodes (RENAME_EXCHANGE). */
void mbfs_itab_exchange(struct mbfs_itab *t, uint64_t p1, const char *n1,
			uint64_t p2, const char *n2);
/* A command moved the files from[i] to to[i] (mount paths; to[i] NULL: it
 * is gone), all at once: the nodes the kernel holds under from[] take the
 * names to[] (or none), and what a to[] named loses its name. */
void mbfs_itab_moved(struct mbfs_itab *t, const char *const *from,
		     const char *const *to, size_t k);
/* parent/name is gone: its node loses its name (and what is below it,
 * its path). */
void mbfs_itab_remove(struct mbfs_itab *t, uint64_t parent, const char *name);

/* ino loses its name (a hidden file removed at its last close). */
void mbfs_itab_unname(struct mbfs_itab *t, uint64_t ino);

/* ino's attributes, as just told to the kernel. */
void mbfs_itab_set_stat(struct mbfs_itab *t, uint64_t ino, const struct stat *st);
/* A node without a path (it, or a directory above it, lost its name): 1 with *st its last attributes, no links; 0 for
 * a named node; -ESTALE for an unknown number. */
int mbfs_itab_gone_stat(struct mbfs_itab *t, uint64_t ino, struct stat *st);
/* A setattr of a node without a path: mode and times kept in its
 * attributes (mask: FUSE_SET_ATTR_*), which *st then holds. */
void mbfs_itab_gone_setattr(struct mbfs_itab *t, uint64_t ino,
			    const struct stat *attr, int mask, struct stat *st);
/* What such setattrs set, over attributes of it from elsewhere (its open
 * copy's, which knows no mode or times of a file with no path). */
void mbfs_itab_gone_overlay(struct mbfs_itab *t, uint64_t ino, struct stat *st);
/* true when ino was hidden (its name is libfuse's hidden pattern). */
bool mbfs_itab_hidden(struct mbfs_itab *t, uint64_t ino);

/* An open of ino (auto_cache: may the kernel keep its pages?). Before the
 * open: 2 when its last attributes are older than max_ms (ask again,
 * then mbfs_itab_set_stat), else 0. Then mbfs_itab_opened, with the
 * handle the open got (cache: whether the pages may stay, attributes
 * unchanged since the last open, is asked). */
int mbfs_itab_cache_age(struct mbfs_itab *t, uint64_t ino, uint64_t max_ms);
bool mbfs_itab_opened(struct mbfs_itab *t, uint64_t ino, uint64_t fh,
		      bool cache);
/* Before the release of fh on ino: no longer lent. false: no such node. */
bool mbfs_itab_closing(struct mbfs_itab *t, uint64_t ino, uint64_t fh);
/* One handle open on ino, for a request that came without one (the
 * kernel's fstat of a file with no path any more): hold(fh), called
 * under the table's lock, takes a reference the caller drops; false when
 * none is open or hold refused each. */
bool mbfs_itab_lend_fh(struct mbfs_itab *t, uint64_t ino,
		       bool (*hold)(uint64_t fh), uint64_t *fh);
/* The kernel's cache of ino is not to be trusted at the next open. */
void mbfs_itab_cache_drop(struct mbfs_itab *t, uint64_t ino);
/* A close of ino: true when it was the last of a hidden node, which the
 * caller then removes (its path is still good), then unnames. */
bool mbfs_itab_closed(struct mbfs_itab *t, uint64_t ino);

#endif
