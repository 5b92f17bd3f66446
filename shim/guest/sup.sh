#!/bin/sh
# sup.sh: the long-lived guest parent of mbexec runs: starts them, reaps them, ends the orphaned and the overdue.
#
# Usage: sup.sh BASE VERSION [KEEP]   (lib.sh's sup_up starts it, setsid -f)
#   KEEP: seconds a finished run is kept for a client that lost an answer
#   and asks again (default 600: mbexec's reconnect window).
#
# Why a parent that lives on: PID 1 of a Mainbrella container is
# `sleep infinity`, which never reaps, so a process whose parent exits first
# stays a zombie until the container ends. Every run (run.sh) is a child of
# this one shell, which reaps it as soon as it ends; the run reaps its own
# command and stdin feeder. Only this supervisor itself becomes a zombie when
# it leaves, after IDLE_TICKS without a run. What a command itself leaves
# running in the background after it exits is reparented to PID 1, as any
# orphan on that runtime: no POSIX shell can adopt it (no subreaper).
#
# It reads one line at a time from the FIFO BASE/ctl-VERSION: a run directory
# to start (run.sh starts a run at most once, however often it is asked) or
# `t N` from the ticker, every N seconds: 5, or 1 while a run's watchdog (or
# KEEP) is shorter than 20 s (tests), so that a waiting guest wakes rarely. Each tick
# counts, for every running run, the seconds since its client last showed a
# sign of life (idle: reset by every poll) and the seconds left before its
# guard (guard: a deadline the client asked for); it ends the command's
# process group when either runs out. Writing `exit` to the FIFO stops the
# supervisor.
# shellcheck disable=SC3013 # dash (and bash) have test -ot
B=$1
V=$2
KEEP=${3:-600}
[ "$KEEP" -ge 2 ] 2>/dev/null || KEEP=600
IDLE_TICKS=${MBX_SUP_IDLE:-600}
cd "$B" || exit 1
exec 9>>"sup-$V.lock"
flock -n 9 || exit 0
[ -p "ctl-$V" ] || mkfifo -m 600 "ctl-$V" 2>/dev/null || [ -p "ctl-$V" ] || exit 1
exec 3<>"ctl-$V"
echo $$ >"sup-$V.pid"
stop=".sup-$V.stop.$$"
rm -f "$stop"

# run.sh starts the command in the foreground, but a background job of a
# non-interactive shell ignores SIGINT, and the command would inherit that.
DS=
if env --default-signal=INT true 2>/dev/null; then
	DS="env --default-signal=INT,QUIT"
fi

# The ticker stops by itself once the stop file exists, so that it can be
# waited for (killing it would orphan its sleep).
# It reads its period from tick-VERSION, which the ticks below keep.
echo 1 >"tick-$V"
(while [ ! -e "$stop" ]; do
	p=1
	read -r p <"tick-$V"
	sleep "$p"
	echo "t $p"
done) >&3 2>/dev/null 9>&- &

# enforce DIR S: a tick of S seconds for the run in DIR (its command runs:
# pgid, no rc); the shortest watchdog seen goes to short
enforce() {
	d=$1
	p=
	read -r p <"$d/pgid" 2>/dev/null || return 0
	[ -n "$p" ] || return 0
	o=900
	read -r o <"$d/orphan" 2>/dev/null
	[ "$o" -lt "$short" ] && short=$o
	# a tick counts at most a quarter of the watchdog: the first one of a
	# run with a short watchdog may be a long one
	i=$2
	[ "$i" -gt $((o / 4)) ] && i=$((o / 4))
	[ "$i" -lt 1 ] && i=1
	n=0
	read -r n <"$d/idle" 2>/dev/null
	n=$((n + i))
	echo "$n" >"$d/idle"
	# the client is gone: end it as a dropped ssh session would
	if [ "$n" -ge "$o" ] && [ $((n - i)) -lt "$o" ]; then
		kill -HUP -"$p" 2>/dev/null
		kill -TERM -"$p" 2>/dev/null
	elif [ "$n" -ge $((o + 5)) ]; then
		kill -KILL -"$p" 2>/dev/null
	fi
	g=0
	read -r g <"$d/guard" 2>/dev/null
	if [ "$g" -gt 0 ]; then
		g=$((g - $2))
		[ "$g" -lt 0 ] && g=0
		echo "$g" >"$d/guard"
		[ "$g" -eq 0 ] && kill -KILL -"$p" 2>/dev/null
	fi
	return 0
}

# sweep: every KEEP ticks, remove the runs that had finished before the
# previous sweep (so each is kept between KEEP and 2 KEEP seconds), and
# launches that never completed (no ready) for as long. Builtin tests only:
# no process per run. Runs still going are never touched.
sweep() {
	mv -f ".sweep-$V.new" ".sweep-$V.old" 2>/dev/null
	: >".sweep-$V.new"
	[ -e ".sweep-$V.old" ] || return 0
	for d in "$B"/*/; do
		d=${d%/}
		if [ -s "$d/rc" ] || [ -s "$d/result" ]; then
			# dash's -ot is false when a file is missing
			if { [ ! -e "$d/rc" ] || [ "$d/rc" -ot ".sweep-$V.old" ]; } &&
				{ [ ! -e "$d/result" ] || [ "$d/result" -ot ".sweep-$V.old" ]; }; then
				rm -rf "$d"
			fi
		elif [ ! -e "$d/ready" ] && [ "$d" -ot ".sweep-$V.old" ]; then
			rm -rf "$d"
		fi
	done
}

idle=0
secs=0
per=1
while read -r line <&3; do
	case $line in
	t | t\ *)
		s=${line#t}
		s=${s# }
		[ "${s:-1}" -ge 1 ] 2>/dev/null || s=1
		secs=$((secs + s))
		busy=0
		short=20
		for d in "$B"/*/; do
			d=${d%/}
			if [ -d "$d/started" ] && [ ! -s "$d/rc" ]; then
				busy=1
				enforce "$d" "$s"
			fi
		done
		if [ $busy = 1 ]; then idle=0; else idle=$((idle + s)); fi
		n=5
		[ "$short" -lt 20 ] || [ "$KEEP" -lt 20 ] && n=1
		if [ "$n" != "$per" ]; then
			per=$n
			echo "$per" >"tick-$V"
		fi
		if [ "$secs" -ge "$KEEP" ]; then
			secs=0
			sweep
		fi
		[ "$idle" -ge "$IDLE_TICKS" ] && break
		;;
	exit)
		break
		;;
	/*)
		idle=0
		if [ -e "$line/ready" ] && [ ! -d "$line/started" ]; then
			# shellcheck disable=SC2086 # DS is a command prefix or empty
			$DS /bin/sh "$B/run-$V.sh" "$line" </dev/null >/dev/null 2>&1 3>&- 9>&- &
		fi
		;;
	esac
done
# Stop taking runs first, so that a launch sees no supervisor and starts one.
rm -f "sup-$V.pid"
exec 9>&-
: >"$stop"
wait
rm -f "$stop"
