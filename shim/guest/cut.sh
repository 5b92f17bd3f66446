#!/bin/sh
# cut.sh: cut a run's stdout from byte OFF into N files of 1 MiB, for parallel GETs (bulk output).
#
# Usage (after lib.sh): cut.sh OFF N FIRST KEEP
# Writes R/piece.FIRST ... R/piece.FIRST+N-1 (six digits; piece FIRST+K
# holds bytes OFF + K MiB onwards); the client asks only for bytes the
# command has written already, so every piece is whole. Pieces numbered
# below KEEP have been fetched and go; KEEP "all" clears every piece (a new
# round of bulk output). The client cuts the next pieces while it still
# fetches earlier ones, so only what it says it has goes; bytes of stdout
# below the kept pieces are written out, and go from R/out (ack, run.sh).
# shellcheck disable=SC2154 # B, V and R are set by the caller
base_ok || { echo '@mbx gone'; exit 0; }
set -- "$1" "$2" "$3" "$4" "$R"/piece.*
off=$1 n=$2 first=$3 keep=$4
shift 4
# the client has written out every byte below the kept pieces: run.sh's
# pump may drop them (ack)
a=$off
[ "$keep" = all ] || a=$((off - (first - keep) * 1048576))
ae=0
read -r _ ae <"$R/ack" 2>/dev/null
echo "$a ${ae:-0}" >"$R/ack"
if [ "$keep" = all ]; then
	rm -f "$R"/piece.*
else
	# each turn drops one name from the front and appends it again when it
	# is to go: at the end only those are left
	for f; do
		shift
		[ -e "$f" ] || continue
		k=${f##*.}
		# six digits with leading zeros: not octal
		k=$((1$k - 1000000))
		[ "$k" -lt "$keep" ] && set -- "$@" "$f"
	done
	[ $# -gt 0 ] && rm -f "$@"
fi
if [ -s "$R/out" ]; then
	dd if="$R/out" bs=1M iflag=skip_bytes,count_bytes skip="$off" \
		count=$((n * 1048576)) 2>/dev/null |
		split -b 1048576 -a 6 --numeric-suffixes="$first" - "$R/piece."
fi
echo '@mbx ack cut'
