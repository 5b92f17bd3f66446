#!/bin/sh
# signal.sh: send a signal to a run's command: INT, TERM (then KILL after 2 s), or INT to a pty's foreground job.
#
# Usage (after lib.sh): signal.sh INT|TERM
# The command may not have written pgid yet: wait up to 1 s for it.
# shellcheck disable=SC2154 # B, V and R are set by the caller
base_ok || { echo '@mbx gone'; exit 0; }
i=0
while [ $i -lt 50 ] && [ -d "$R" ] && [ ! -s "$R/pgid" ] &&
	[ ! -s "$R/rc" ] && [ ! -s "$R/result" ]; do
	sleep 0.02
	i=$((i + 1))
done
p=
[ -s "$R/pgid" ] && read -r p <"$R/pgid"
if [ -z "$p" ] || [ -s "$R/rc" ] || [ -s "$R/result" ]; then
	echo '@mbx ack ended'
	exit 0
fi
if [ "$1" = INT ]; then
	# in a pty, the terminal's foreground job gets it, as from a Ctrl-C
	tp=
	if [ -s "$R/ptypid" ] && read -r q <"$R/ptypid" &&
		read -r _ _ _ _ _ _ _ tp _ <"/proc/$q/stat" 2>/dev/null &&
		[ -n "$tp" ] && [ "$tp" -gt 0 ]; then
		kill -INT -"$tp" 2>/dev/null
	else
		kill -INT -"$p" 2>/dev/null
	fi
else
	kill -TERM -"$p" 2>/dev/null
	i=0
	while [ $i -lt 20 ] && kill -0 -"$p" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL -"$p" 2>/dev/null
fi
echo '@mbx ack sent'
