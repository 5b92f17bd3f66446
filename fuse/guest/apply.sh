#!/bin/sh
# apply.sh: put a batch of small files in place (write-back, fuse/wbsend.c).
#
# Usage: apply.sh PARTS NPARTS STAGE PREV
# PARTS.00000 ... (NPARTS of them, in the guest's /tmp/.mbfs-up) are the
# 1 MiB pieces of one tar archive that mbfs PUT: a member "list", then
# for each file a member "G/NAME" carrying its mode and mtime. list has a
# line "dDIR" (an absolute guest directory; "d" alone is /) opening group
# G (0, 1, ... in list order), followed by a line "fNAME" for each file of
# the group, NAME a file name in DIR (never a '/' or a newline), or by a
# line "tTIME": give DIR the modification time TIME (a touch -d value),
# after the files before it are in place (their renames moved it). A time
# that cannot be set is left (touch -c: DIR may be gone).
#
# The archive is unpacked into STAGE, a hidden directory (.mbfs-up-HEX)
# in the mounted directory, so on the files' filesystem; then each
# group's files are renamed into DIR by one `mv -f` (rename(2)): a reader
# sees the old file or the new one, never a part of it. A target that is
# a directory or a symlink, or a DIR that is gone, fails that file alone.
#
# Prints "x I WHY" for each file I (0-based, in list order) not put in
# place, then "ok COUNT". The report is left in PARTS.done too: a rerun
# with the same arguments (mbfs lost the answer) prints it again and
# applies nothing twice. PREV ("-" for none) is the report of an earlier
# batch, no longer needed. Exits 0 with a report; 3 when a part is
# missing; 1 on any other failure (tar's message on stderr). STAGE and
# the parts are removed in every case.
export LC_ALL=C
p=$1 np=$2 sd=$3 prev=$4
[ "$prev" = - ] || rm -f -- "$prev"
cleanup() {
	rm -rf -- "$sd"
	rm -f -- "$p".[0-9]*
}
if [ -f "$p.done" ]; then
	cleanup
	cat -- "$p.done"
	exit 0
fi
set --
i=0
while [ "$i" -lt "$np" ]; do
	f=$(printf '%s.%05d' "$p" "$i")
	if ! [ -f "$f" ]; then
		echo "part $i of the batch is missing" >&2
		cleanup
		exit 3
	fi
	set -- "$@" "$f"
	i=$((i + 1))
done
rm -rf -- "$sd"
if ! mkdir -- "$sd" || ! cat -- "$@" | tar -x -p --no-same-owner -f - -C "$sd"; then
	cleanup
	exit 1
fi
# one mv per directory: the files to move pile up in "$@"
set --
g=-1
dir=/
while IFS= read -r l; do
	k=${l%"${l#?}"} v=${l#?}
	if [ "$k" = d ]; then
		[ $# -eq 0 ] || mv -f -- "$@" "$dir/" 2>/dev/null || :
		set --
		g=$((g + 1))
		dir=${v:-/}
	elif [ "$k" = t ]; then
		[ $# -eq 0 ] || mv -f -- "$@" "$dir/" 2>/dev/null || :
		set --
		touch -c -m -d "$v" -- "$dir" 2>/dev/null || :
	elif [ -d "$dir" ] && ! [ -L "$dir/$v" ] && ! [ -d "$dir/$v" ]; then
		set -- "$@" "$sd/$g/$v"
	fi
done <"$sd/list"
[ $# -eq 0 ] || mv -f -- "$@" "$dir/" 2>/dev/null || :
# what is still staged was not moved
i=-1
g=-1
{
	while IFS= read -r l; do
		k=${l%"${l#?}"} v=${l#?}
		if [ "$k" = d ]; then
			g=$((g + 1))
			dir=${v:-/}
			continue
		fi
		[ "$k" = t ] && continue
		i=$((i + 1))
		s=$sd/$g/$v
		[ -e "$s" ] || [ -L "$s" ] || continue
		if ! [ -d "$dir" ]; then
			echo "x $i no such directory"
		elif [ -L "$dir/$v" ] || [ -d "$dir/$v" ]; then
			echo "x $i not a regular file"
		else
			echo "x $i cannot rename it into place"
		fi
	done <"$sd/list"
	echo "ok $((i + 1))"
} >"$p.tmp"
if ! mv -f -- "$p.tmp" "$p.done"; then
	cleanup
	exit 1
fi
cleanup
cat -- "$p.done"
