#!/bin/sh
# follow.sh: while a command runs there, what the mount holds of the sandbox, asked about once a second: the files held open, the directories listed.
#
# Usage: follow.sh [ROOT FILE ID...] [-d DIR...]
# For each FILE, in order, one line: "SIZE MTIME ID" (bytes, whole Unix
# seconds, DEVICE:INODE:BIRTH, BIRTH in seconds with nine decimals, 0
# where the file system keeps no birth time) of the regular file it names, or "-" when it is gone or is
# no regular file (a symlink is not followed). ID is what the mount last
# knew FILE as ("-": nothing): a known one no longer at FILE is looked for
# under ROOT, on its device, by inode number, and each place found is said
# as "> ID PATH" with the ID found there (a command renamed a file held
# open: its fds follow it, as on a local disk; the birth time tells it
# from a new file that took a freed inode number). Then "=". Then, with
# -d, every DIR and
# its entries, all in one find (this runs every second while a command
# runs): "@", then per entry "DEPTH TYPE MODE UID GID SIZE MTIME PATH" (0
# for DIR itself, 1 for DIR/NAME; find's %y, octal mode bits, numeric
# owner, bytes, seconds with a fraction), for a symlink its target on the
# next line, and "! DIR" for a DIR that is no directory (or a symlink), or
# that holds a name or target with a newline; "." last when every DIR was
# read. Only reads. mbfs (fuse/face/follow.c) fetches again the open files
# that changed, moves those renamed, and takes the listings as fresh ones;
# before and after a command it asks about the open files alone; after a
# command (fuse/bulk/relist.c), the listings it held come back the same way.
nl='
'
if [ $# -gt 0 ] && [ "$1" != -d ]; then
	root=$1
	shift
	lost=
	while [ $# -gt 1 ] && [ "$1" != -d ]; do
		line=-
		if [ -f "$1" ] && [ ! -L "$1" ]; then
			line=$(stat -c '%s %Y %d:%i:%.9W' -- "$1" 2>/dev/null) || line=-
		fi
		echo "$line"
		case $2 in
		-|"${line##* }") ;;
		*[!0-9:.]*|*:*:*:*|:*|*:|*::*) ;;
		*:*:*)
			ino=${2#*:}
			lost="$lost -o -inum ${ino%%:*}"
			;;
		esac
		shift 2
	done
	if [ -n "$lost" ]; then
		# inode numbers only (checked above); one walk for all of them
		# shellcheck disable=SC2086
		find "$root" -xdev -name "*$nl*" -prune -o -type f \( ${lost# -o } \) \
			-exec stat -c '> %d:%i:%.9W %n' -- {} + 2>/dev/null
	fi
	echo '='
fi
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
