/* lease.c: keep-alive calls and the hard-deadline warning (see lease.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/session/lease.h"
#include "fuse/mbfs.h"
#include "fuse/transport/route.h"

/* after a failed keep-alive, the next try comes this soon at the latest */
#define RETRY_MS 15000u

struct mbfs_lease {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* stop */
	bool stop;               /* protected by lock */
	pthread_t thread;
};

uint64_t mbfs_lease_default_ms(long long idle_timeout_ms)
{
	if (idle_timeout_ms <= 0)
		return MBFS_LEASE_DEFAULT_MS;
	uint64_t ms = (uint64_t)idle_timeout_ms / 3;
	return ms ? ms : 1;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds until the warning is due (<= 0: now); INT64_MAX when there
 * is none to give. */
static int64_t warn_in_ms(struct mbfs *fs)
{
	if (!fs->expires_sec || atomic_load(&fs->deadline_warned) ||
	    atomic_load(&fs->stopped))
		return INT64_MAX;
	return ((int64_t)fs->expires_sec - MBFS_LEASE_WARN_S) * 1000 - wall_ms();
}

void mbfs_lease_warn_if_due(struct mbfs *fs)
{
	if (warn_in_ms(fs) > 0 || atomic_exchange(&fs->deadline_warned, 1))
		return;
	int64_t left = (int64_t)fs->expires_sec * 1000 - wall_ms();
	long mins = left > 0 ? (long)((left + 59999) / 60000) : 0;
	mb_log(MB_LOG_WARN, "container '%s' generation %s reaches its hard "
	       "deadline at %s (%s%ld min): it cannot be extended; save what you "
	       "need from %s before then, then mount a new container",
	       fs->ident.id, fs->ident.created_at, fs->expires_at,
	       left > 0 ? "in " : "", mins, fs->mountpoint);
}

/* One cheap renewing call: a stat of the mounted root. */
static bool renew(struct mbfs *fs)
{
	const char *root = fs->root[0] ? fs->root : "/";
	struct mb_entry e;
	struct mb_err err;
	mb_err_clear(&err);
	int rc = mbfs_route_lstat(fs, root, &e, &err);
	if (rc == 0) {
		mb_entry_release(&e);
		mb_log(MB_LOG_DEBUG, "keep-alive: the container was idle for %llu s",
		       (unsigned long long)(fs->keepalive_ms / 1000));
		return true;
	}
	mbfs_fail(fs, rc, &err);   /* logs; a gone generation stops the mount */
	return false;
}

static void wait_until(struct mbfs_lease *l, uint64_t mono_ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(mono_ms / 1000),
		.tv_nsec = (long)(mono_ms % 1000) * 1000000L,
	};
	pthread_cond_timedwait(&l->cond, &l->lock, &ts);
}

static void *run(void *arg)
{
	struct mbfs *fs = arg;
	struct mbfs_lease *l = fs->lease;
	/* the checks before mounting renewed the container just now */
	uint64_t since = mb_now_ms();
	uint64_t retry_at = 0;   /* after a failed keep-alive */
	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		uint64_t now = mb_now_ms(), next = UINT64_MAX;
		if (fs->keepalive_ms && !atomic_load(&fs->stopped)) {
			uint64_t last = mb_client_last_renew_ms(fs->client);
			uint64_t due = (last > since ? last : since) + fs->keepalive_ms;
			if (retry_at && retry_at > due)
				due = retry_at;
			if (now >= due) {
				pthread_mutex_unlock(&l->lock);
				bool ok = renew(fs);
				pthread_mutex_lock(&l->lock);
				retry_at = 0;
				if (!ok) {
					uint64_t wait = fs->keepalive_ms < RETRY_MS
						? fs->keepalive_ms : RETRY_MS;
					retry_at = mb_now_ms() + wait;
				}
				continue;
			}
			next = due;
		}
		int64_t w = warn_in_ms(fs);
		if (w <= 0) {
			pthread_mutex_unlock(&l->lock);
			mbfs_lease_warn_if_due(fs);
			pthread_mutex_lock(&l->lock);
			continue;
		}
		if (w != INT64_MAX && (uint64_t)w < next - now)
			next = now + (uint64_t)w;
		if (next == UINT64_MAX)
			pthread_cond_wait(&l->cond, &l->lock);
		else
			wait_until(l, next);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int mbfs_lease_start(struct mbfs *fs)
{
	if (!fs->keepalive_ms && !fs->expires_sec)
		return 0;
	struct mbfs_lease *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&l->lock, NULL);
	fs->lease = l;
	int rc = pthread_create(&l->thread, NULL, run, fs);
	if (rc) {
		fs->lease = NULL;
		pthread_cond_destroy(&l->cond);
		pthread_mutex_destroy(&l->lock);
		free(l);
		return -rc;
	}
	return 0;
}

void mbfs_lease_stop(struct mbfs *fs)
{
	struct mbfs_lease *l = fs->lease;
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	fs->lease = NULL;
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
