#!/bin/sh
# touch.sh: set the times of a batch of guest files (mbfs's utimens, sent in one exec).
#
# Usage: touch.sh [ATIME MTIME COUNT MARK PATH...]...
# A list of groups. Each sets the access and modification times of its
# COUNT PATHs with `touch -c -h` (no file is created, a symlink is changed
# itself): ATIME and MTIME are touch -d values (@SECONDS.NANOSECONDS), or
# - to leave that time alone. When a group's touch fails, prints
#   !mbfs-touch-failed MARK
# (MARK: mbfs's numbers for the group's items, for fuse/touch.c to tell
# which failed) and goes on with the next group; stderr has touch's message.
# Exits 0 when the arguments were read to the end, whatever failed.
#
# Paths with the same times share one group, so one touch process serves
# many files; mbfs cuts batches so that the whole exec stays below the
# exec request's size limit.
#
# The for loop walks the arguments as they were when it started, so inside
# it "$@" is free to collect the current group's paths (in time that grows
# with the square of a group's size: mbfs sends at most 256 paths a group).
apply() {
	if [ "$a" = "$m" ]; then
		[ "$a" = - ] || touch -c -h -d "$a" -- "$@"
	else
		{ [ "$a" = - ] || touch -c -h -a -d "$a" -- "$@"; } &&
			{ [ "$m" = - ] || touch -c -h -m -d "$m" -- "$@"; }
	fi || echo "!mbfs-touch-failed $k"
}
st=a
for x do
	case $st in
	a) a=$x st=m ;;
	m) m=$x st=n ;;
	n) n=$x st=k ;;
	k)
		k=$x st=p
		set --
		;;
	p) set -- "$@" "$x" ;;
	esac
	if [ "$st" = p ] && [ $# -ge "$n" ]; then
		apply "$@"
		st=a
	fi
done
