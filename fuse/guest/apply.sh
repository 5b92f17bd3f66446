#!/bin/sh
# apply.sh: put a batch of small files in place (write-back, fuse/wbsend.c).
#
# Usage: apply.sh PARTS NPARTS STAGE PREV
# PARTS.00000 ... (NPARTS of them, in the guest's /tmp/.mbfs-up) are the
# 1 MiB pieces of one tar archive that mbfs PUT: a member "list", then
# for each file a member "G/NAME" carrying its mode and mtime. list starts
# with a line "mMODE DIR" for each directory to make (an absolute guest
# path; its parent exists or is made by an earlier line), made with mode
# MODE (octal) before anything else; one that is there already as a
# directory is taken and given MODE. Then a line "dDIR" (an absolute guest
# directory; "d" alone is /) opens group G (0, 1, ... in list order),
# followed by a line "fNAME" for each file of the group, NAME a file name
# in DIR (never a '/' or a newline), by a line "tTIME": give DIR the
# modification time TIME (a touch -d value), or by a line "cMODE": give DIR
# the mode MODE, each after the files before it are in place (their
# renames moved the time). A time or a mode that cannot be set is left
# (DIR may be gone).
#
# The archive is unpacked into STAGE, a hidden directory (.mbfs-up-HEX)
# in the mounted directory, so on the files' filesystem; then each
# group's files are renamed into DIR by one `mv -f` (rename(2)): a reader
# sees the old file or the new one, never a part of it. A target that is
# a directory or a symlink, or a DIR that is gone, fails that file alone.
#
# Prints "y I WHY" for each directory I (0-based, in list order) not made,
# "x I WHY" for each file I not put in place, then "ok COUNT" (the files). The report is left in PARTS.done too: a rerun
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
mi=0
: >"$sd/made"
while IFS= read -r l; do
	k=${l%"${l#?}"} v=${l#?}
	if [ "$k" = m ]; then
		md=${v#* }
		if ! err=$(mkdir -m "${v%% *}" -- "$md" 2>&1); then
			if [ -d "$md" ] && ! [ -L "$md" ]; then
				chmod "${v%% *}" -- "$md" 2>/dev/null || :
			else
				echo "y $mi ${err##*: }" >>"$sd/made"
			fi
		fi
		mi=$((mi + 1))
	elif [ "$k" = c ]; then
		[ $# -eq 0 ] || mv -f -- "$@" "$dir/" 2>/dev/null || :
		set --
		chmod "$v" -- "$dir" 2>/dev/null || :
	elif [ "$k" = d ]; then
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
	cat -- "$sd/made"
	while IFS= read -r l; do
		k=${l%"${l#?}"} v=${l#?}
		if [ "$k" = d ]; then
			g=$((g + 1))
			dir=${v:-/}
			continue
		fi
		case $k in [mtc]) continue ;; esac
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
