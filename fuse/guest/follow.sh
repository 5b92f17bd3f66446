#!/bin/sh
# follow.sh: the size and mtime of the files the mount holds open, asked about once a second while a command runs there.
#
# Usage: follow.sh PATH...
# Prints one line per PATH, in order: "SIZE MTIME" (bytes, whole Unix
# seconds) of the regular file PATH names, or "-" when PATH is gone or is
# no regular file (a symlink is not followed). Only reads. mbfs
# (fuse/face/follow.c) compares the lines with the copies it has and
# fetches again what changed.
for p in "$@"; do
	if [ -f "$p" ] && [ ! -L "$p" ]; then
		stat -c '%s %Y' -- "$p" 2>/dev/null || echo -
	else
		echo -
	fi
done
