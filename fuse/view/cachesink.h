/* cachesink.h: the view's answer to the outbox's sink (fuse/outbox/sink.h):
 * results go to the cache, questions to the view. main.c sets fs->sink to
 * it before the outbox starts. */
#ifndef MBFS_VIEW_CACHESINK_H
#define MBFS_VIEW_CACHESINK_H

#include "fuse/outbox/sink.h"

extern const struct mbfs_out_sink mbfs_view_sink;

#endif
