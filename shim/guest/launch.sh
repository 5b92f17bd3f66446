#!/bin/sh
# launch.sh: start one mbexec run on the guest (at most once), wait a little for its end, report.
#
# Usage (after lib.sh): launch.sh WAIT MODE GUARD ORPHAN COLS ROWS LATE
#   with C (remote directory), and S (the script) or SF (a guest file
#   holding it), IN (base64 stdin for MODE embed), T (the TERM of a pty
#   run, when the client has one) set by the caller.
#   WAIT: seconds to wait for the end ("1.000"; 0: do not wait); MODE:
#   none, embed, stream or pty; GUARD: seconds after which the command is
#   killed (0: never); ORPHAN: seconds without a poll after which it is
#   ended; COLS ROWS: the terminal size for pty; LATE: wait (the run ends
#   when every writer of its output has closed it) or nowait (when its main
#   process exits; see run.sh).
# Creating R is the guard: a retried launch finds it and only reports (and
# re-dispatches a run that the supervisor did not get). mkdir fails on any
# name that exists, a symlink included, so R is always fresh and ours; B
# was made private by base_make (the caller runs it first).
# MBX_ENV: the login shell's exported variables (`export -p`, see
# mb_exec_clean), kept in R/env for the user's command; this shell and the
# supervisor it may start never see them.
# shellcheck disable=SC2154 # B, V, R, C, S, SF and IN are set by the caller
E=${MBX_ENV-}
unset MBX_ENV
new=0
if mkdir -m 700 "$R" 2>/dev/null; then
	new=1
	if [ ! -d "$C" ]; then
		echo '@mbx nocwd' >"$R/result"
	elif ! command -v setsid >/dev/null 2>&1 || ! command -v flock >/dev/null 2>&1; then
		echo '@mbx fail setsid-or-flock-missing' >"$R/result"
	elif [ "$2" = pty ] && ! command -v script >/dev/null 2>&1; then
		echo '@mbx fail script-missing' >"$R/result"
	elif [ -n "${SF:-}" ] && { [ -L "$SF" ] || [ ! -f "$SF" ]; }; then
		# the client's PUT made a regular file: anything else was planted
		rm -f "$SF"
		echo '@mbx fail script-file' >"$R/result"
	else
		printf %s "$C" >"$R/cwd"
		printf '%s\n' "$E" >"$R/env"
		if [ -n "${SF:-}" ]; then
			mv -f "$SF" "$R/cmd"
		else
			printf %s "$S" >"$R/cmd"
		fi
		: >"$R/out"
		: >"$R/err"
		: >"$R/ev"
		case $2 in
		embed) printf %s "$IN" | base64 -d >"$R/in" ;;
		stream | pty) mkfifo "$R/fifo" ;;
		esac
		[ -n "${T:-}" ] && printf %s "$T" >"$R/term"
		echo "$5 $6" >"$R/winsz"
		echo "$2" >"$R/mode"
		echo "$3" >"$R/guard"
		echo "$4" >"$R/orphan"
		echo "${7:-wait}" >"$R/late"
		echo 0 >"$R/idle"
		echo $$ >"$R/waiter"
		: >"$R/ready"
	fi
elif [ -L "$R" ] || [ ! -d "$R" ]; then
	echo '@mbx fail mkdir'
	exit 0
fi
if [ $new = 1 ] && [ ! -s "$R/result" ]; then
	# run.sh wakes us with SIGUSR1 when the command has ended
	trap 'w=1' USR1
	if ! dispatch; then
		echo '@mbx fail supervisor' >"$R/result"
	elif [ "$1" != 0 ] && [ ! -s "$R/rc" ]; then
		sleep "$1" >/dev/null 2>&1 &
		tp=$!
		[ -s "$R/rc" ] || wait $tp
		kill $tp 2>/dev/null
		wait $tp 2>/dev/null
	fi
	rm -f "$R/waiter"
	trap - USR1
elif [ $new = 0 ] && [ ! -e "$R/ready" ] && [ ! -s "$R/result" ]; then
	echo '@mbx lost'
	exit 0
fi
alive
on=0
en=0
rep 0 0
# what this report holds is what an mbexec --attach starts after
[ -d "$R" ] && echo "$on $en" >"$R/seen"
