#!/bin/sh
# mux.sh: mbfs's wait for any of many mbexec polls, sent in one exec for all of them.
#
# Usage: mux.sh WAIT STEPS, after the clients' preludes and setups (lib.sh
# of mbexec, whose poll_setup notes each run for wait_any), a function
# mux_ready that succeeds when any client has something new, and NF, a
# file the mount appends to when a new client waits for this poll
# (fuse/agent.c writes all of them). Waits until then, or WAIT seconds
# (lib.sh's wait_any); the clients' reports follow.
# An mbexec older than wait_any (its lib.sh has none): its 50 ms checks.
if mux_ready; then
	:
elif command -v wait_any >/dev/null 2>&1; then
	wait_any "$1" "$2" mux_ready
else
	sleep "$1" >/dev/null 2>&1 &
	tp=$!
	i=0
	while [ $i -lt "$2" ] && kill -0 $tp 2>/dev/null && ! mux_ready; do
		sleep 0.05
		i=$((i + 1))
	done
	kill $tp 2>/dev/null
	wait $tp 2>/dev/null
fi
