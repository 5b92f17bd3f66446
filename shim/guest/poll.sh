#!/bin/sh
# poll.sh: report a run's output from byte offsets, waiting up to a bound for something new.
#
# Usage (after lib.sh): poll.sh OO EO INPOS WAIT STEPS RECORD
#   OO, EO: stdout/stderr bytes the client has (`seen seen`: those of the
#   last recorded poll, for mbexec --attach); INPOS: stdin chunks it knows
#   consumed (-1: not waiting for stdin); WAIT: seconds ("1.000"); STEPS: a
#   cap on 50 ms checks; RECORD: 1 to keep OO EO as what the client has. Returns at once when output beyond OO/EO,
#   the end, or a new in.pos is there; else waits with builtin tests only,
#   one sleep per step, bounded by the wall clock (a timer sleep).
# shellcheck disable=SC2154,SC3013 # B, V, R set by the caller; dash has test -nt
oo=$1
eo=$2
ipos=$3
if [ "$oo" = seen ]; then
	read -r oo eo <"$R/seen" 2>/dev/null || { oo=0; eo=0; }
elif [ "${6:-0}" = 1 ] && [ -d "$R" ]; then
	echo "$oo $eo" >"$R/seen"
fi
alive
if [ -d "$R" ] && [ ! -s "$R/rc" ] && [ ! -s "$R/result" ]; then
	# shellcheck disable=SC2046 # two numbers
	set -- $(stat -c %s "$R/out" "$R/err" 2>/dev/null) "$4" "$5"
	wait_s=${3:-0}
	steps=${4:-0}
	p=0
	[ -s "$R/in.pos" ] && read -r p <"$R/in.pos"
	if [ "${1:-0}" -le "$oo" ] && [ "${2:-0}" -le "$eo" ] &&
		{ [ "$ipos" -lt 0 ] || [ "$p" = "$ipos" ]; }; then
		: >"$R/.mark"
		sleep "$wait_s" >/dev/null 2>&1 &
		tp=$!
		i=0
		while [ $i -lt "$steps" ] && kill -0 $tp 2>/dev/null && [ -d "$R" ] &&
			[ ! -s "$R/rc" ] &&
			! [ "$R/out" -nt "$R/.mark" ] && ! [ "$R/err" -nt "$R/.mark" ] &&
			{ [ "$ipos" -lt 0 ] || ! [ "$R/in.pos" -nt "$R/.mark" ]; }; do
			sleep 0.05
			i=$((i + 1))
		done
		kill $tp 2>/dev/null
		wait $tp 2>/dev/null
	fi
fi
rep "$oo" "$eo"
