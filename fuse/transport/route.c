/* route.c: the API's file routes for the modules above transport/
 * (route.h). */
#include "common/api.h"
#include "fuse/mbfs.h"
#include "fuse/transport/route.h"

int mbfs_route_lstat(struct mbfs *fs, const char *rpath, struct mb_entry *e,
		     struct mb_err *err)
{
	return mb_fs_stat(fs->client, &fs->ident, rpath, false, e, err);
}

int mbfs_route_list(struct mbfs *fs, const char *rpath,
		    struct mb_entry_list *out, long *next, struct mb_err *err)
{
	if (!next)
		return mb_fs_list_all(fs->client, &fs->ident, rpath, out, err);
	return mb_fs_list(fs->client, &fs->ident, rpath, MB_MAX_LIST_ENTRIES, 0,
			  out, next, err);
}

int mbfs_route_put(struct mbfs *fs, const char *rpath, const void *data,
		   size_t len, struct mb_err *err)
{
	return mb_file_put(fs->client, &fs->ident, rpath, data, len, err);
}

int mbfs_route_mkdir_private(struct mbfs *fs, const char *rpath,
			     struct mb_err *err)
{
	return mb_fs_mkdir(fs->client, &fs->ident, rpath, false, 0700, err);
}

int mbfs_route_mkdirs(struct mbfs *fs, const char *rpath, struct mb_err *err)
{
	return mb_fs_mkdir(fs->client, &fs->ident, rpath, true, 0755, err);
}

int mbfs_route_chmod(struct mbfs *fs, const char *rpath, unsigned mode,
		     struct mb_err *err)
{
	return mb_fs_chmod(fs->client, &fs->ident, rpath, mode, err);
}

int mbfs_route_remove_tree(struct mbfs *fs, const char *rpath,
			   struct mb_err *err)
{
	return mb_fs_remove(fs->client, &fs->ident, rpath, true, err);
}
