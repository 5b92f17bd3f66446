/* pathsel.c: which paths a barrier selects relative to a path (pathsel.h). */
#include <string.h>

#include "fuse/outbox/pathsel.h"

bool mbfs_path_at_or_below(const char *a, const char *b)
{
	if (strcmp(b, "/") == 0)
		return true;
	size_t n = strlen(b);
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

bool mbfs_path_is_parent(const char *a, const char *b)
{
	const char *slash = strrchr(b, '/');
	if (!slash || strcmp(b, "/") == 0)
		return false;
	size_t n = (size_t)(slash - b);
	if (n == 0)
		return strcmp(a, "/") == 0;
	return strncmp(a, b, n) == 0 && a[n] == '\0';
}

bool mbfs_path_selects(const char *item, const char *path, unsigned which)
{
	bool self = strcmp(item, path) == 0;
	return ((which & MBFS_BATCH_SELF) && self) ||
	       ((which & MBFS_BATCH_BELOW) && !self &&
		mbfs_path_at_or_below(item, path)) ||
	       ((which & MBFS_BATCH_PARENT) && mbfs_path_is_parent(item, path)) ||
	       ((which & MBFS_BATCH_CHILDREN) && mbfs_path_is_parent(path, item));
}
