#!/bin/sh
# cut.sh: cut a run's stdout from byte OFF into N files of 1 MiB, for parallel GETs (bulk output).
#
# Usage (after lib.sh): cut.sh OFF N
# Writes R/piece.0000 ... (piece K holds bytes OFF + K MiB onwards); the
# client asks only for bytes the command has written already, so every
# piece is whole. The pieces of the cut before are removed first.
# shellcheck disable=SC2154 # B, V and R are set by the caller
rm -f "$R"/piece.*
if [ -s "$R/out" ]; then
	tail -c +$(($1 + 1)) "$R/out" | head -c $(($2 * 1048576)) |
		split -b 1048576 -a 4 -d - "$R/piece."
fi
echo '@mbx ack cut'
