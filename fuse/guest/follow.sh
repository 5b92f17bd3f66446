#!/bin/sh
# follow.sh: while a command runs there, what the mount holds of the sandbox, asked about once a second: the files held open, the directories listed.
#
# Usage: follow.sh [FILE...] [-d DIR...]
# For each FILE, in order, one line: "SIZE MTIME" (bytes, whole Unix
# seconds) of the regular file it names, or "-" when it is gone or is no
# regular file (a symlink is not followed). Then for each DIR, in order:
# "!" when it is no directory (or a symlink), cannot be read, or holds a
# name or link target with a newline; else "@" and one line per entry:
# "TYPE MODE UID GID SIZE MTIME NAME" (find's %y, octal mode bits,
# numeric owner, bytes, seconds with a fraction), and for a symlink its
# target on the next line. Only reads. mbfs (fuse/face/follow.c) fetches
# again the open files that changed and takes the listings as fresh ones.
nl='
'
dirs=0
for p in "$@"; do
	if [ "$dirs" = 0 ] && [ "$p" = -d ]; then
		dirs=1
	elif [ "$dirs" = 0 ]; then
		if [ -f "$p" ] && [ ! -L "$p" ]; then
			stat -c '%s %Y' -- "$p" 2>/dev/null || echo -
		else
			echo -
		fi
	elif [ -d "$p" ] && [ ! -L "$p" ] &&
		odd=$(find "$p" -mindepth 1 -maxdepth 1 \( -name "*$nl*" -o -lname "*$nl*" \) -print 2>/dev/null) &&
		[ -z "$odd" ] &&
		out=$(find "$p" -mindepth 1 -maxdepth 1 \( -type l -printf 'l %m %U %G %s %T@ %f\n%l\n' \) \
			-o -printf '%y %m %U %G %s %T@ %f\n' 2>/dev/null); then
		echo @
		if [ -n "$out" ]; then
			printf '%s\n' "$out"
		fi
	else
		echo !
	fi
done
