#!/bin/sh
# join.sh: place parts of a large upload in the file that replaces its target; the last call renames it over the target.
#
# Usage: join.sh ROOT DIR TMP PART FIRST TARGET SIZE MODE SHA256...
# Checks DIR/p.FIRST, the next part and so on (mbfs PUT them as
# DIR/p.00000, p.00001, ..., PART bytes each but the last) against the
# SHA256s (hex, one per part, in order; none: no part), then writes them
# into TMP from byte FIRST * PART on (TMP holds the parts before already;
# whatever it holds past them goes). With TARGET "-" that is all: a round,
# run while later parts are still being PUT. Otherwise it then checks that
# TMP holds SIZE bytes, gives it MODE (octal; "-": TARGET's mode), renames
# it over TARGET and removes DIR. Prints nothing. Exits 0 when done; 3 when a part is missing
# or its checksum differs, or TMP's size is wrong (mbfs reports EIO); 1 on
# any other failure, with coreutils' message on stderr. TMP and DIR stay
# on failure: mbfs removes them.
#
# TMP is next to TARGET (mbfs names it .mbfs-up-RANDOM in TARGET's
# directory): a rename within one directory is atomic, so readers see the
# old content or the new, never a part; DIR is in /tmp, which may be
# another filesystem. Repeatable as long as DIR exists, which is why DIR
# goes last: a part is written at its own offset, so placing it again
# writes the same bytes, and mbfs repeats the last call whose answer was
# lost only after finding TARGET without the new content.
#
# Nothing is written through a symlink: each call first checks that DIR
# is a directory (not a symlink, nor in one: the sandbox may plant one to
# steer the parts), exit 3 otherwise; and enters TMP's directory, which
# must then be that directory physically: no directory between ROOT (the
# mounted directory's guest path, which may be a symlink itself) and TMP
# may be a symlink, nor TMP itself (the sandbox swapped one in: the file
# would land outside the mounted directory), exit 4 otherwise, with a line
# naming TMP. TMP and TARGET are then written and renamed by their names in it,
# so a swap racing the check leads nothing out either.
#
# LC_ALL=C: the messages stay the English ones mbfs maps to errno.
export LC_ALL=C
umask 077
root=$1 d=$2 a=$3 part=$4 first=$5 t=$6 size=$7 mode=$8
shift 8
bad() {
	echo "$1" >&2
	exit 3
}
if [ -L "$d" ] || [ -L "${d%/*}" ] || ! [ -d "$d" ]; then
	# swapped for a link: the part PUTs followed it; take them back
	rm -f -- "$d"/p.[0-9]* 2>/dev/null
	bad "the staging directory '$d' is missing or not a directory of ours"
fi
top=$(cd -P -- "${root:-/}" && pwd -P) || exit 1
dir=${a%/*}
want=${top%/}${dir#"$root"}
if ! cd -P -- "${dir:-/}" 2>/dev/null; then
	echo "mbfs: cannot reach '$a': No such file or directory" >&2
	exit 1
fi
if [ "$PWD" != "${want:-/}" ]; then
	echo "mbfs: refused '$a': Too many levels of symbolic links" \
		"(a directory on its path is a symlink)" >&2
	exit 4
fi
tmp=$a
a=./${a##*/}
[ "$t" = - ] || t=./${t##*/}
# TMP itself: a symlink planted in its place would take the parts out
if [ -L "$a" ]; then
	echo "mbfs: refused '$tmp': Too many levels of symbolic links" \
		"(a symlink is in its place)" >&2
	exit 4
fi
# each turn takes one checksum from the front and appends the part's
# name: at the end only the names are left
i=$first want=
for h; do
	shift
	# five digits with leading zeros, as mbfs names them
	k=$((100000 + i))
	[ -f "$d/p.${k#1}" ] || bad "part ${k#1} is missing"
	set -- "$@" "$d/p.${k#1}"
	want="${want:+$want
}$h"
	i=$((i + 1))
done
# the parts before FIRST were placed by earlier calls: a joined file that
# lacks them (removed or cut meanwhile) must not pass the size check with a
# hole that the cut below would leave
if [ "$first" -gt 0 ]; then
	s=$(stat -c %s -- "$a") || bad 'the joined file is missing'
	[ "$s" -ge $((first * part)) ] ||
		bad "the joined file has $s bytes, fewer than its first $first parts"
fi
if [ $# -gt 0 ]; then
	# openssl uses the CPU's SHA extensions: several times faster than
	# sha256sum where it is installed
	if command -v openssl >/dev/null 2>&1; then
		sums=$(openssl dgst -sha256 -r "$@") || exit 1
	else
		sums=$(sha256sum -- "$@") || exit 1
	fi
	# both print "HEX NAME" lines (one or two spaces, maybe a *)
	got=$(printf '%s\n' "$sums" | cut -d' ' -f1) || exit 1
	[ "$got" = "$want" ] || bad 'checksum mismatch in the parts'
	# rounds go in order, so the parts land at their offsets by appending
	# to the parts before: one pass, no pipe. The cut first drops what a
	# repeated call (its answer lost) placed already.
	truncate -s $((first * part)) -- "$a" || exit 1
	cat -- "$@" >>"$a" || exit 1
fi
[ "$t" = - ] && exit 0
s=$(stat -c %s -- "$a") || exit 1
[ "$s" = "$size" ] || bad "the joined parts are $s bytes, not $size"
# a file created by mbfs gets the mode it was created with (no chmod
# request after); else keep the mode of the file we replace, and a target
# removed meanwhile comes back private (600) rather than with whatever the
# guest's umask gives
if [ "$mode" != - ]; then
	chmod "$mode" "$a"
elif [ -e "$t" ]; then
	chmod --reference="$t" "$a"
else
	chmod 600 "$a"
fi || exit 1
mv -fT -- "$a" "$t" || exit 1
cd / && rm -rf "$d"
