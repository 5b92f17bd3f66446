#!/bin/sh
# split.sh: cut a guest file into pieces that mbfs fetches with parallel GETs (a large download).
#
# Usage: split.sh FILE DIR SIZE
# Makes DIR (mode 700; it must not exist yet), cuts FILE into DIR/p.00000,
# DIR/p.00001, ... of SIZE bytes each (the last one shorter) and prints the
# size of every piece, in order, one decimal number a line: nothing for an
# empty FILE. Exits 1 with coreutils' message on stderr when it cannot, and
# then leaves no DIR behind. mbfs (fuse/xfer.c) GETs DIR/p.NNNNN itself,
# checks each against the size printed here, and removes DIR afterwards.
#
# LC_ALL=C: the glob below lists the pieces in byte order, which is their
# numeric order, and the messages stay the English ones mbfs maps to errno.
export LC_ALL=C
f=$1 d=$2
fail() {
	rm -rf "$d"
	exit 1
}
# DIR is a fresh random name under /tmp: a mkdir that fails (already there,
# someone else's) stops us rather than splitting into a directory we do not own.
mkdir -m 700 "$d" || exit 1
# -a 5 -d: the names mbfs computes (p.%05zu); up to 100000 pieces, past
# that split fails ("output file suffixes exhausted").
split -b "$3" -a 5 -d -- "$f" "$d/p." || fail
cd "$d" || fail
# an empty FILE makes no piece
[ -e p.00000 ] || exit 0
# one stat for many pieces (a stat each took seconds for a few GiB);
# printf is a builtin, so the list is not bound by the exec argument
# limit, and xargs keeps its order
printf '%s\n' p.* | xargs stat -c %s -- || fail
