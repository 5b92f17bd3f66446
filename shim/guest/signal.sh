#!/bin/sh
# signal.sh: send a signal to a run's command: INT, TERM (then KILL after 2 s), or INT to a pty's foreground job.
#
# Usage (after lib.sh): signal.sh INT|TERM
# The command may not have written pgid yet: wait up to 1 s for it.
# shellcheck disable=SC2154 # B, V and R are set by the caller
base_ok || { echo '@mbx gone'; exit 0; }

# group_lives PGID: does a process of the group still run? kill -0 says
# yes for a zombie too, and a child whose shell died first is one for good
# (PID 1 of the container never reaps): the wait for TERM would always
# last its 2 s. Builtins only; without /proc, kill -0.
group_lives() {
	g=$1
	[ -r /proc/self/stat ] || { kill -0 -"$g" 2>/dev/null; return; }
	for s in /proc/[0-9]*/stat; do
		read -r l <"$s" 2>/dev/null || continue
		# pid (comm) state ppid pgrp ...: comm may hold spaces and ")"
		l=${l##*) }
		# shellcheck disable=SC2086 # split into its fields on purpose
		set -- $l
		[ "$1" != Z ] && [ "$3" = "$g" ] && return 0
	done
	return 1
}
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
	while [ $i -lt 20 ] && group_lives "$p"; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL -"$p" 2>/dev/null
fi
echo '@mbx ack sent'
