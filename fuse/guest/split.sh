#!/bin/sh
# split.sh: cut pieces of a guest file that mbfs fetches with parallel GETs (a large download).
#
# Usage: split.sh FILE DIR SIZE FIRST COUNT [DONE...]
# Removes DIR/DONE... (pieces mbfs has fetched), then cuts pieces FIRST to
# FIRST+COUNT-1 of FILE into DIR/p.NNNNN (five digits): piece K holds SIZE
# bytes from K * SIZE on, the last one fewer, and none is cut past the end.
# FIRST 0 begins a download: it makes DIR (mode 700; it must not exist
# yet); later rounds cut into the DIR it made. Prints one line "SIZE INODE
# MTIME" of FILE, then the size of every piece cut, in order, one decimal
# number a line. Exits 1 with coreutils' message on stderr when it cannot,
# or when FILE changed while its pieces were cut; a first round that fails
# leaves no DIR behind. mbfs (fuse/xfer_pieces.c) cuts the next pieces while it
# GETs the ones cut already, checks each piece against the size the first
# round's line gives and every round's line against the first's (a file
# changed while read), and removes DIR at the end.
#
# LC_ALL=C: the messages stay the English ones mbfs maps to errno.
export LC_ALL=C
f=$1 d=$2 size=$3 first=$4 count=$5
shift 5
fail() {
	[ "$first" -eq 0 ] && rm -rf "$d"
	exit 1
}
# DIR is a fresh random name under /tmp: a mkdir that fails (already there,
# someone else's) stops us rather than cutting into a directory we do not own.
if [ "$first" -eq 0 ]; then
	mkdir -m 700 "$d" || exit 1
fi
cd "$d" || fail
[ $# -gt 0 ] && rm -f -- "$@"
was=$(stat -L -c '%s %i %Y' -- "$f") || fail
end=$(((${was%% *} + size - 1) / size))
[ "$end" -gt $((first + count)) ] && end=$((first + count))
if [ "$end" -gt "$first" ]; then
	# one pass (dd seeks to the first piece); the names are the ones mbfs
	# computes (p.%05zu): up to 100000 pieces, past that split fails
	# ("output file suffixes exhausted")
	dd if="$f" bs="$size" skip="$first" count=$((end - first)) \
		iflag=fullblock status=none |
		split -b "$size" -a 5 --numeric-suffixes="$first" - p. || fail
fi
now=$(stat -L -c '%s %i %Y' -- "$f") || fail
if [ "$now" != "$was" ]; then
	echo "split.sh: '$f' changed while it was cut" >&2
	fail
fi
echo "$now"
[ "$end" -gt "$first" ] || exit 0
# one stat for many pieces; seq and xargs keep their order. A piece dd
# could not read is missing: stat fails after dd's message.
seq -f 'p.%05g' "$first" $((end - 1)) | xargs stat -c %s -- || fail
