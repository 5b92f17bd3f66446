#!/bin/sh
# lib.sh: what every mbexec guest op shares: the report of a run, and handing a run to the supervisor.
#
# mbexec sends `B=... V=... R=...` assignments, this file, then one op
# (launch.sh, poll.sh...), as one `/bin/sh -lc` exec. B is the base
# directory (/tmp/.mbexec), V the version of sup.sh/run.sh (installed as
# B/sup-V.sh, B/run-V.sh by the launch), R the run directory.
# shellcheck disable=SC2154 # B, V and R are set by the caller

# rep OO EO: one report from byte offsets OO (stdout) and EO (stderr):
#   @mbx STATE RC OUTSIZE ERRSIZE INPOS OO ON EO EN, base64 of ON bytes of
#   out, @e, base64 of EN bytes of err, @end
# or the run's one-line result. The common case (everything from offset 0)
# costs one stat and one base64 per non-empty stream.
rep() {
	all=0
	if [ -s "$R/result" ]; then cat "$R/result"; return 0; fi
	if [ ! -d "$R" ]; then echo '@mbx gone'; return 0; fi
	st=running
	rc=-
	if [ -s "$R/rc" ]; then st="done"; read -r rc <"$R/rc"; fi
	os=0
	es=0
	ip=0
	if [ -s "$R/out" ] || [ -s "$R/err" ]; then
		# shellcheck disable=SC2046 # two numbers
		set -- "$1" "$2" $(stat -c %s "$R/out" "$R/err" 2>/dev/null)
		os=${3:-0}
		es=${4:-0}
	fi
	[ -s "$R/in.pos" ] && read -r ip <"$R/in.pos"
	en=$((es - $2))
	[ $en -gt 327680 ] && en=327680
	[ $en -lt 0 ] && en=0
	on=$((os - $1))
	[ $on -gt $((655360 - en)) ] && on=$((655360 - en))
	[ $on -lt 0 ] && on=0
	echo "@mbx $st $rc $os $es ${ip:-0} $1 $on $2 $en"
	if [ $on = "$os" ] && [ $on -gt 0 ]; then
		base64 "$R/out"
	elif [ $on -gt 0 ]; then
		tail -c +$(($1 + 1)) "$R/out" | head -c $on | base64
	fi
	echo @e
	if [ $en = "$es" ] && [ $en -gt 0 ]; then
		base64 "$R/err"
	elif [ $en -gt 0 ]; then
		tail -c +$(($2 + 1)) "$R/err" | head -c $en | base64
	fi
	echo @end
	[ $st = "done" ] && [ $(($1 + on)) -eq "$os" ] && [ $(($2 + en)) -eq "$es" ] && all=1
	if [ $all = 1 ] && [ -p "$R/fifo" ]; then
		rm -f "$R/in" "$R/fifo" "$R"/in.[0-9]*
	fi
	return 0
}

# sup_up: make sure this version's supervisor runs. A free lock means none
# does; two launches racing here start two, and the second one leaves at
# once (sup.sh takes the lock itself).
sup_up() {
	[ -p "$B/ctl-$V" ] || mkfifo -m 600 "$B/ctl-$V" 2>/dev/null || [ -p "$B/ctl-$V" ] || return 1
	free=0
	{ flock -n 5 && free=1; } 5>>"$B/sup-$V.lock"
	if [ $free = 1 ]; then
		setsid -f /bin/sh "$B/sup-$V.sh" "$B" "$V" "${K:-120}" </dev/null >/dev/null 2>&1 || return 1
	fi
	return 0
}

# dispatch: ask the supervisor to start the run in R. Opening the FIFO
# read-write never blocks; the line waits in it for a supervisor that is
# still starting, as long as this shell keeps fd 4 (the launch waits).
dispatch() {
	sup_up || return 1
	exec 4<>"$B/ctl-$V"
	echo "$R" >&4
}

# alive: the client is alive (the supervisor's orphan count restarts), and a
# run that was dispatched and lost on the way (the supervisor left just
# then) is dispatched again.
alive() {
	if [ -d "$R" ] && [ ! -s "$R/rc" ] && [ ! -s "$R/result" ]; then
		echo 0 >"$R/idle"
		if [ -e "$R/ready" ] && [ ! -d "$R/started" ]; then
			dispatch
		fi
	fi
	return 0
}
