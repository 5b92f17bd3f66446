/* help.h: the text of mbfs --help. */
#ifndef MBFS_HELP_H
#define MBFS_HELP_H

#include <stdio.h>

/* mbfs's usage lines and options, then the few libfuse options that mean
 * something to mbfs (not libfuse's own help: it lists cache defaults
 * that mbfs overrides), to f. */
void mbfs_usage(FILE *f);
void mbfs_fuse_help(FILE *f);

#endif
