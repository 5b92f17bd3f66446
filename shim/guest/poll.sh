#!/bin/sh
# poll.sh: report a run's output from byte offsets, waiting up to a bound for something new.
#
# Usage (after lib.sh): poll.sh OO EO INPOS WAIT STEPS RECORD
#   OO, EO: stdout/stderr bytes the client has (`seen seen`: those of the
#   last recorded poll, for mbexec --attach); INPOS: stdin chunks it knows
#   consumed (-1: not waiting for stdin); WAIT: seconds ("1.000"); STEPS: a
#   cap on 50 ms checks; RECORD: 1 to keep OO EO as what the client has.
# Returns at once when output beyond OO/EO, the end, or a new in.pos is
# there. A mount that polls many runs in one exec (mbfs's mux) calls the
# same lib.sh functions for each.
# shellcheck disable=SC2154 # B, V and R are set by the caller
oo=$1
eo=$2
if [ "$oo" = seen ]; then
	read -r oo eo <"$R/seen" 2>/dev/null || { oo=0; eo=0; }
fi
poll_setup "$R" "$oo" "$eo" "$3" "${6:-0}"
poll_ready "$R" "$3" || wait_any "$4" "$5" poll_ready "$R" "$3"
rep "$oo" "$eo"
