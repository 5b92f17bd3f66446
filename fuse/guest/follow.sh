#!/bin/sh
# follow.sh: while a command runs there, what the mount holds of the sandbox, asked about once a second: the files held open, the directories listed.
#
# Usage: follow.sh [FILE...] [-d DIR...]
# For each FILE, in order, one line: "SIZE MTIME" (bytes, whole Unix
# seconds) of the regular file it names, or "-" when it is gone or is no
# regular file (a symlink is not followed). Then, with -d, every DIR and
# its entries, all in one find (this runs every second while a command
# runs): "@", then per entry "DEPTH TYPE MODE UID GID SIZE MTIME PATH" (0
# for DIR itself, 1 for DIR/NAME; find's %y, octal mode bits, numeric
# owner, bytes, seconds with a fraction), for a symlink its target on the
# next line, and "! DIR" for a DIR that is no directory (or a symlink), or
# that holds a name or target with a newline; "." last when every DIR was
# read. Only reads. mbfs (fuse/face/follow.c) fetches again the open files
# that changed and takes the listings as fresh ones; after a command
# (fuse/bulk/relist.c), the listings it held come back the same way.
nl='
'
while [ $# -gt 0 ] && [ "$1" != -d ]; do
	if [ -f "$1" ] && [ ! -L "$1" ]; then
		stat -c '%s %Y' -- "$1" 2>/dev/null || echo -
	else
		echo -
	fi
	shift
done
[ $# -gt 0 ] || exit 0
shift
echo @
# the directories that are directories go to find; the others are said
n=$#
while [ "$n" -gt 0 ]; do
	if [ -d "$1" ] && [ ! -L "$1" ]; then
		set -- "$@" "$1"
	else
		printf '! %s\n' "$1"
	fi
	shift
	n=$((n - 1))
done
[ $# -gt 0 ] || { echo .; exit 0; }
find "$@" -maxdepth 1 \
	\( \( -name "*$nl*" -o -lname "*$nl*" \) -printf '! %h\n' \) \
	-o \( -type l -printf '%d l %m %U %G %s %T@ %p\n%l\n' \) \
	-o -printf '%d %y %m %U %G %s %T@ %p\n' 2>/dev/null && echo .
