#!/bin/sh
# mux.sh: mbfs's wait for any of many mbexec polls, sent in one exec for all of them.
#
# Usage: mux.sh WAIT STEPS, after the clients' preludes and setups and a
# function mux_ready that succeeds when any client has something new
# (fuse/agent.c writes both). Waits until then, checking every 50 ms, at
# most STEPS times and WAIT seconds of wall clock; the client's reports
# follow. The timer sleep is waited for: the guest's PID 1 never reaps.
if ! mux_ready; then
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
