/* watch.c: notice that our mount was removed while copies of it live on.
 *
 * A process that makes a new mount namespace (unshare, systemd units with
 * private mounts, sandboxes) copies every mount it can see, ours included.
 * `fusermount3 -u` then removes only the mount in our namespace, and the
 * kernel keeps the connection alive for the copies: the daemon would wait
 * for ever. A thread reads /proc/self/mountinfo every second; once the
 * mount (identified by its device number) is gone from our namespace it
 * ends the session as SIGTERM would (dirty files are still uploaded), and
 * closing the device then detaches the copies.
 * Does not touch the mount itself. Thread-safe by construction: only the
 * watcher thread reads its state after mbfs_watch_start.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/session/watch.h"

atomic_int mbfs_watch_gone;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static bool watch_stopped;      /* protected by watch_lock */
static char watch_dev[32];      /* "major:minor" of our mount */
static char watch_mnt[4096];

/* Find our mount: the last fuse.mbfs line at mnt (mountinfo escapes
 * spaces and such as \ooo; compare unescaped). */
static bool find_mount(const char *mnt, const char *dev, char *dev_out,
		       size_t n)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return true;   /* cannot tell: assume still mounted */
	char line[8192];
	bool found = false;
	while (fgets(line, sizeof(line), f)) {
		char mdev[32], point[4096], unesc[4096];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", mdev, point) != 2)
			continue;
		size_t j = 0;
		for (size_t i = 0; point[i] && j + 1 < sizeof(unesc); i++) {
			unsigned o;
			if (point[i] == '\\' && sscanf(point + i + 1, "%3o", &o) == 1) {
				unesc[j++] = (char)o;
				i += 3;
			} else {
				unesc[j++] = point[i];
			}
		}
		unesc[j] = '\0';
		const char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "fuse.mbfs ", 10) != 0)
			continue;
		if (dev ? strcmp(mdev, dev) == 0 : strcmp(unesc, mnt) == 0) {
			found = true;
			if (dev_out)
				snprintf(dev_out, n, "%s", mdev);
		}
	}
	fclose(f);
	return found;
}

static void *watcher(void *arg)
{
	(void)arg;
	for (;;) {
		sleep(1);
		if (!find_mount(watch_mnt, watch_dev, NULL, 0))
			break;
	}
	/* under the lock: once mbfs_watch_stop returned, the session's signal
	 * handlers may be gone and a SIGTERM would kill us */
	pthread_mutex_lock(&watch_lock);
	if (!watch_stopped) {
		mb_log(MB_LOG_INFO, "'%s' was unmounted; exiting", watch_mnt);
		atomic_store(&mbfs_watch_gone, 1);
		kill(getpid(), SIGTERM);
	}
	pthread_mutex_unlock(&watch_lock);
	return NULL;
}

void mbfs_watch_stop(void)
{
	pthread_mutex_lock(&watch_lock);
	watch_stopped = true;
	pthread_mutex_unlock(&watch_lock);
}

int mbfs_watch_start(const char *mountpoint)
{
	snprintf(watch_mnt, sizeof(watch_mnt), "%s", mountpoint);
	if (!find_mount(watch_mnt, NULL, watch_dev, sizeof(watch_dev)) ||
	    !watch_dev[0])
		return -1;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &a, watcher, NULL);
	pthread_attr_destroy(&a);
	return rc ? -1 : 0;
}
