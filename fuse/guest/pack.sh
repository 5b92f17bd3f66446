#!/bin/sh
# pack.sh: one tar of the small files under a guest directory, in pieces that mbfs fetches with parallel GETs (bulk reads).
#
# Usage: pack.sh ROOT FIRST DIR SIZE CAPBYTES MAXFILES PREV [EXCLUDED...]
# PREV ("-" for none) is the DIR of an earlier run, no longer needed:
# removed first, whatever happens next (only a /tmp/.mbfs-dl-* name).
# Lists the regular files of at most 262144 bytes under ROOT (symlinks
# are not followed): first those directly in ROOT/FIRST (FIRST is "." or
# a path relative to ROOT), then the rest of the tree. Skips upload
# staging (.mbfs-up*), names holding the byte 001 and the subtrees
# ROOT/EXCLUDED (relative to ROOT; ignored when gone). Stops before the
# archive would pass CAPBYTES or MAXFILES files, so a huge tree is not
# walked to its end. MAXFILES 0 archives nothing: the pieces hold the
# listings alone (below), and CUT is 1 when there are none. The files go into one GNU tar (members "./REL", REL
# relative to ROOT) cut into DIR/p.00000, DIR/p.00001, ... of SIZE bytes
# each (the last one shorter); DIR (mode 700) must not exist yet.
#
# When the caps left nothing out, the listings of ROOT and of every
# directory below it (except upload staging) follow the archive in the
# pieces: a record of 9 fields per entry, each ended by a NUL: type
# (find's %y), mode bits in octal, uid, gid, size, mtime (seconds, maybe
# with a fraction), the directory (".", "./a", ...), the name, and the
# link's target (empty unless a symlink).
#
# Prints "NOW FILES CUT LISTBYTES": the guest's clock (Unix seconds)
# before the walk, the files archived, 1 when the caps left some out
# (else 0), the bytes of listings at the end of the pieces (0: none);
# then the size of every piece, in order, one decimal number a line. With
# MAXFILES 0 and at most 384 KiB of listings, no piece: the first line is
# "NOW 0 0 0", and the listings follow on one line, "@" then their base64.
# With no file, no DIR is left and no piece printed. Exits 1 (message on stderr,
# no DIR left) when it cannot. mbfs (fuse/prefetch.c) GETs the pieces,
# checks each against its size here, and removes DIR.
#
# LC_ALL=C: byte semantics for awk's length and the glob of the pieces.
export LC_ALL=C
root=$1 first=$2 d=$3 size=$4 cap=$5 max=$6 prev=$7
shift 7
case $prev in
*/..*) ;;
/tmp/.mbfs-dl-*) rm -rf -- "$prev" ;;
esac
fail() {
	rm -rf "$d"
	exit 1
}
now=$(date +%s)
cd -- "$root" || exit 1
# a mount of the guest's / walks no kernel file system (reading
# /proc/kmsg would block)
if [ "$root" = / ]; then
	set -- "$@" proc sys dev
fi
# the remaining arguments become find's: "-samefile E -prune -o" for each
# excluded subtree still there (an inode test: no pattern to escape)
n=$#
while [ "$n" -gt 0 ]; do
	if [ -d "./$1" ]; then
		set -- "$@" -samefile "./$1" -prune -o
	fi
	shift
	n=$((n - 1))
done
# DIR is a fresh random name under /tmp: a mkdir that fails (already there,
# someone else's) stops us rather than packing into a directory we do not own.
mkdir -m 700 "$d" || exit 1
# MAXFILES 0: the listings alone (a walk that lists before it reads), cut
# short by head on a huge tree; none when find fails (an unreadable
# directory) or they pass 4 MiB
if [ "$max" = 0 ]; then
	{
		find . -mindepth 1 \( -name '.mbfs-up*' -prune \) -o \
			-printf '%y\0%m\0%U\0%G\0%s\0%T@\0%h\0%f\0%l\0' 2>/dev/null ||
			: >"$d/failed"
	} | head -c 4194305 >"$d/ls"
	ls=$(wc -c <"$d/ls")
	if [ -e "$d/failed" ] || [ "$ls" -gt 4194304 ] || [ "$ls" -eq 0 ]; then
		rm -rf "$d"
		echo "$now 0 1 0"
		exit 0
	fi
	# up to 384 KiB, they come in this answer (in base64 after an "@",
	# on the line after "NOW 0 0 0"): no piece to GET
	if [ "$ls" -le 393216 ] && command -v base64 >/dev/null 2>&1; then
		b=$(base64 -w 0 <"$d/ls") || fail
		rm -rf "$d"
		printf '%s 0 0 0\n@%s\n' "$now" "$b"
		exit 0
	fi
	split -b "$size" -a 5 -d "$d/ls" "$d/p." || fail
	rm -f "$d/ls"
	cd "$d" || fail
	echo "$now 0 0 $ls"
	printf '%s\n' p.* | xargs stat -c %s -- || fail
	exit 0
fi
odd=$(printf '*\001*')
# One name a record: find ends each with NUL; tr turns NULs into newlines
# and newlines (in names) into 001, which awk passes through and the tr
# before tar turns back. awk keeps the first listing of a name (FIRST's
# files come twice), sums what tar will write (a header, the data in
# 512-byte blocks, a GNU long-name member for names of 100 bytes or
# more) and exits at a cap, which ends find with SIGPIPE.
r=$({
	if [ "$first" != . ]; then
		find "./$first" -maxdepth 1 \( -name '.mbfs-up*' -o -name "$odd" \) \
			-prune -o -type f -size -262145c -printf '%s %p\0'
	fi
	find . \( -name '.mbfs-up*' -o -name "$odd" \) -prune -o "$@" \
		-type f -size -262145c -printf '%s %p\0'
} 2>/dev/null | tr '\n\000' '\001\n' | awk -v cap="$cap" -v max="$max" \
	-v out="$d/list" '
{
	i = index($0, " ")
	s = substr($0, 1, i - 1) + 0
	f = substr($0, i + 1)
	if (f in seen)
		next
	t = 512 + int((s + 511) / 512) * 512
	if (length(f) >= 100)
		t += 512 + int((length(f) + 512) / 512) * 512
	if (k >= max || tot + t > cap) {
		cut = 1
		exit
	}
	seen[f] = 1
	tot += t
	k++
	print f > out
}
END { printf "%d %d\n", k, cut }') || fail
k=${r% *} cut=${r#* }
if [ "$k" -eq 0 ]; then
	rm -rf "$d"
	echo "$now 0 $cut 0"
	exit 0
fi
# find writes the listings itself: NUL-ended fields take any name; an
# unreadable directory (find fails) or a huge tree gives none
ls=0
if [ "$cut" = 0 ] && find . -mindepth 1 \( -name '.mbfs-up*' -prune \) -o \
	-printf '%y\0%m\0%U\0%G\0%s\0%T@\0%h\0%f\0%l\0' >"$d/ls" 2>/dev/null; then
	ls=$(wc -c <"$d/ls")
	[ "$ls" -le 4194304 ] || ls=0
fi
# -b 1: no padding to tar's usual 10 KiB records. A file removed or
# unreadable by now is left out (--ignore-failed-read); one changed while
# read keeps its old mtime in the header, which mbfs then never matches.
{
	tr '\n\001' '\000\n' <"$d/list" |
		tar -c -b 1 --format=gnu --no-recursion --ignore-failed-read \
			--null -T - -f - 2>/dev/null
	[ "$ls" = 0 ] || cat "$d/ls"
} | split -b "$size" -a 5 -d - "$d/p." || fail
rm -f "$d/list" "$d/ls"
cd "$d" || fail
[ -e p.00000 ] || fail
echo "$now $k $cut $ls"
printf '%s\n' p.* | xargs stat -c %s -- || fail
