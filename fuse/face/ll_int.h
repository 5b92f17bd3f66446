/* ll_int.h: what the parts of the FUSE session share: ll.c (the session,
 * attributes and files), ll_name.c (namespace requests) and ll_dir.c
 * (open directories). Not for other modules. */
#ifndef MBFS_LL_INT_H
#define MBFS_LL_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "fuse/face/itab.h"
#include "fuse/face/ll.h"

/* The one session's state: set by mbfs_ll_new and the init request. */
struct mbfs_ll {
	struct fuse_session *se;
	struct mbfs_itab *itab;
	const struct fuse_operations *op;
	const struct mbfs_ll_opts *o;
	double entry_timeout, attr_timeout, negative_timeout;
	uint64_t ac_ms;
	bool auto_cache;
	atomic_uint hidectr;
};
extern struct mbfs_ll mbfs_ll;
#define L mbfs_ll
#define T L.itab

/* At the start of each request: who asks (mbfs_ll_uid). */
void mbfs_ll_begin(fuse_req_t req);
/* Reply rc (-errno, or 0 for success without data). */
void mbfs_ll_reply_err(fuse_req_t req, int rc);
/* The path of ino ("/name" appended when name is not NULL) into buf
 * (MB_PATH_MAX), with the tree locks of l taken (l->read[0] = ino, with
 * what the caller set; itab.h): 0 or -errno. The caller lets go with
 * mbfs_itab_unlock either way. */
int mbfs_ll_path(struct mbfs_itab_locks *l, uint64_t ino, const char *name,
		 char *buf);
/* The same for a request on ino without a file handle: 0 with path set,
 * 1 when the node has none (its last attributes in *st), or -errno. */
int mbfs_ll_node_path(struct mbfs_itab_locks *l, fuse_ino_t ino, char *path,
		      struct stat *st);

/* The attributes of a new or found name, and its node counted once more
 * (the reply must then reach the kernel, or be forgotten). */
int mbfs_ll_lookup_path(uint64_t parent, const char *name, const char *path,
			struct fuse_entry_param *e, struct fuse_file_info *fi);
/* Reply e, or rc; a reply that does not reach the kernel is forgotten. */
void mbfs_ll_reply_entry(fuse_req_t req, const struct fuse_entry_param *e,
			 int rc);
/* -o umask: the permissions every file shows. */
void mbfs_ll_set_mode(struct stat *st);

void mbfs_ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, dev_t rdev);
void mbfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode);
void mbfs_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void mbfs_ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void mbfs_ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		     const char *name);
void mbfs_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags);
void mbfs_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		  const char *newname);

void mbfs_ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *llfi);
void mbfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *llfi);
void mbfs_ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *llfi);
void mbfs_ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		      struct fuse_file_info *llfi);

#endif
