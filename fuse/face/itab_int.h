/* itab_int.h: what the parts of the inode table share: itab.c (the
 * table), itab_open.c (opens, nodes without a path), itab_lock.c (tree
 * locks). Not for other modules. Every function here wants t->lock held.
 */
#ifndef MBFS_ITAB_INT_H
#define MBFS_ITAB_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct inode {
	uint64_t ino;
	struct inode *parent;   /* NULL when nameless (and for the root) */
	char *name;             /* NULL when nameless; "" for the root */
	uint64_t nlookup;
	unsigned open;
	unsigned children;      /* named children */
	bool hidden;
	bool cache_valid;       /* auto_cache: pages kept since the last open */
	bool own_mode, own_atime, own_mtime;   /* set while it had no path:
	                           kept over what its open copy says */
	int treelock;           /* requests whose path goes through it (> 0),
	                           or -1: its name is being changed */
	unsigned wwait;         /* requests waiting to change its name */
	uint64_t *fhs;          /* the handles open on it */
	unsigned nfhs;
	struct stat st;         /* the last attributes told */
	uint64_t st_ms;         /* when */
	struct inode *id_next;
	struct inode *name_next;
};

struct mbfs_itab {
	pthread_mutex_t lock;
	pthread_cond_t tree;    /* a tree lock was let go */
	struct inode **by_id;
	struct inode **by_name;
	size_t nbuckets;        /* of each, a power of two */
	size_t count;
	uint64_t next_ino;
	struct inode root;
};

struct inode *itab_get_locked(struct mbfs_itab *t, uint64_t ino);
struct inode *itab_find_locked(struct mbfs_itab *t, uint64_t parent,
			       const char *name);
/* n loses its name (out of the name table, its parent's child no more). */
void itab_unname_locked(struct mbfs_itab *t, struct inode *n);
/* n goes when nothing holds it any more. */
void itab_maybe_free_locked(struct mbfs_itab *t, struct inode *n);
/* n's attributes, as told to the kernel (auto_cache's check too). */
void itab_note_stat_locked(struct inode *n, const struct stat *st);

#endif
