/* name.c: which names the mount can hand to the guest (see name.h). */
#include <errno.h>
#include <string.h>

#include "common/util.h"
#include "fuse/name.h"

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
