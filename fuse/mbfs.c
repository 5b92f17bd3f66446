/* mbfs.c: the small helpers every layer of mbfs shares (mbfs.h): path
 * mapping, the hash, the liveness check, the struct stat of an entry. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/api.h"
#include "fuse/mbfs.h"

int mbfs_remote_path(const struct mbfs *fs, const char *path, char *out)
{
	int n;
	if (strcmp(path, "/") == 0)
		n = snprintf(out, MB_PATH_MAX, "%s", fs->root[0] ? fs->root : "/");
	else
		n = snprintf(out, MB_PATH_MAX, "%s%s", fs->root, path);
	if (n < 0 || n >= MB_PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

uint64_t mbfs_fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

int mbfs_check_alive(struct mbfs *fs)
{
	return atomic_load(&fs->stopped) ? -ENOTCONN : 0;
}

void mbfs_entry_stat(const struct mbfs *fs, const struct mb_entry *e,
		     struct stat *st)
{
	static const mode_t types[] = {
		[MB_FT_FILE] = S_IFREG, [MB_FT_DIR] = S_IFDIR,
		[MB_FT_SYMLINK] = S_IFLNK, [MB_FT_FIFO] = S_IFIFO,
		[MB_FT_SOCKET] = S_IFSOCK, [MB_FT_CHAR] = S_IFCHR,
		[MB_FT_BLOCK] = S_IFBLK, [MB_FT_OTHER] = S_IFREG,
	};
	memset(st, 0, sizeof(*st));
	mode_t type = (unsigned)e->type <= MB_FT_OTHER ? types[e->type] : S_IFREG;
	st->st_mode = type | (e->mode & 07777);
	/* 1 means "unknown" to find(1) for directories: no leaf optimisation */
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)e->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((e->size + 511) / 512);
	st->st_mtim.tv_sec = e->mtime;
	if (e->mtime_nsec > 0 && e->mtime_nsec < 1000000000L)
		st->st_mtim.tv_nsec = e->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}
