#!/bin/sh
# touch.sh: set the times of a batch of guest files (mbfs's utimens, sent in one exec).
#
# Usage: touch.sh ROOT [ATIME MTIME COUNT MARK PATH...]...
# ROOT is the guest path of the mounted directory ("" for /), then a list
# of groups. Each sets the access and modification times of its
# COUNT PATHs with `touch -c -h` (no file is created, a symlink is changed
# itself): ATIME and MTIME are touch -d values (@SECONDS.NANOSECONDS), or
# - to leave that time alone. When a group's touch fails, prints
#   !mbfs-touch-failed MARK
# (MARK: mbfs's numbers for the group's items, for fuse/touch.c to tell
# which failed) and goes on with the next group; stderr has touch's message.
# A PATH below ROOT that passes through a symlink on its way there (a
# directory the sandbox swapped for one) would change a file outside the
# mounted directory: it is left alone and reported on its own, as
#   !mbfs-touch-failed ITEM
# (ITEM: its number in MARK) with a line on stderr naming it.
# Exits 0 when the arguments were read to the end, whatever failed.
#
# Paths with the same times share one group, so one touch process serves
# many files; mbfs cuts batches so that the whole exec stays below the
# exec request's size limit.
#
# The for loop walks the arguments as they were when it started, so inside
# it "$@" is free to collect the current group's paths (in time that grows
# with the square of a group's size: mbfs sends at most 256 paths a group).
# Is a directory between ROOT and $1 (not $1 itself) a symlink?
swapped() {
	s=${1%/*}
	while [ "${#s}" -gt "${#root}" ]; do
		[ -L "$s" ] && return 0
		s=${s%/*}
	done
	return 1
}
# enter DIR: make DIR (ROOT or below it) the working directory, only when
# it is that directory physically at the moment of the cd: a directory
# swapped for a symlink racing the check above is caught too, and a name
# relative to it stays in it.
enter() {
	want=${top%/}${1#"$root"}
	cd -P -- "${1:-/}" 2>/dev/null && [ "$PWD" = "${want:-/}" ]
}
# its directory and name in it, as enter takes them
split() {
	if [ "$1" = "$root" ]; then
		dir=$root name=.
	else
		dir=${1%/*} name=./${1##*/}
	fi
}
refused() {
	echo "!mbfs-touch-failed $1"
	echo "mbfs: refused '$2': Too many levels of symbolic" \
		"links (a directory on its path is a symlink)" >&2
}
# reach ITEMS PATH: enter $dir for them; else say why (a directory gone
# leaves nothing to touch, as touch -c), non-zero
reach() {
	enter "$dir" && return 0
	if [ -d "${dir:-/}/" ]; then
		refused "$1" "$2"
	elif [ -e "$dir" ] || [ -L "$dir" ]; then
		echo "!mbfs-touch-failed $1"
		echo "touch: cannot touch '$2': Not a directory" >&2
	fi
	return 1
}
stamp() {
	if [ "$a" = "$m" ]; then
		[ "$a" = - ] || touch -c -h -d "$a" -- "$@"
	else
		{ [ "$a" = - ] || touch -c -h -a -d "$a" -- "$@"; } &&
			{ [ "$m" = - ] || touch -c -h -m -d "$m" -- "$@"; }
	fi
}
apply() {
	# the paths a swapped directory leads out of the mount are dropped
	ks="$k "
	c=$#
	one=1 first=
	for x do
		ki=${ks%% *} ks=${ks#* }
		if swapped "$x"; then
			refused "$ki" "$x"
			continue
		fi
		set -- "$@" "$x"
		split "$x"
		if [ -z "$first" ]; then
			first=1 od=$dir
		elif [ "$dir" != "$od" ]; then
			one=
		fi
	done
	shift "$c"
	[ $# -gt 0 ] || return 0
	if [ -n "$one" ]; then
		# one directory (a tar x's files): one touch from inside it
		split "$1"
		reach "$k" "$1" || return 0
		c=$#
		for x do
			split "$x"
			set -- "$@" "$name"
		done
		shift "$c"
		stamp "$@" || echo "!mbfs-touch-failed $k"
		return 0
	fi
	# several: one touch each, each from inside its directory
	ks="$k "
	for x do
		ki=${ks%% *} ks=${ks#* }
		split "$x"
		if reach "$ki" "$x"; then
			stamp "$name" || echo "!mbfs-touch-failed $ki"
		fi
	done
}
st=r
for x do
	case $st in
	r)
		root=$x st=a
		top=$(cd -P -- "${root:-/}" && pwd -P) || top=
		;;
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
