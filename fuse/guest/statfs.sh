#!/bin/sh
# statfs.sh: the sizes of the filesystem holding a guest directory, for statfs(2) on the mount.
#
# Usage: statfs.sh DIR
# Prints `df -kP DIR` (1 KiB blocks), then `df -iP DIR` (inodes) if that
# works: mbfs (fuse/remote.c) takes the inode counts when they are there
# and shows blocks only otherwise, so only the first df failing is an
# error (exit 1, df's message on stderr).
df -kP -- "$1" || exit 1
df -iP -- "$1" || true
