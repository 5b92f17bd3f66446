#!/bin/sh
# lib.sh: what every mbexec guest op shares: the report of a run, and handing a run to the supervisor.
#
# mbexec sends `B=... V=... R=...` assignments, this file, then one op
# (launch.sh, poll.sh...), as one `/bin/sh -lc` exec. B is the base
# directory (/tmp/.mbexec), V the version of sup.sh/run.sh (installed as
# B/sup-V.sh, B/run-V.sh by the launch), R the run directory.
# shellcheck disable=SC2154 # B, V and R are set by the caller

# base_ok: B is still the private directory base_make made: a directory of
# ours, not a symlink (builtin tests only). Every op that writes under B
# checks it first: a sandbox that swapped B for a link into the workspace
# would get our run files there.
base_ok() {
	[ ! -L "$B" ] && [ -d "$B" ] && [ -O "$B" ]
}

# base_make: make B such a directory, 0700. Whatever else is there (a
# symlink, a file, somebody else's directory) is moved aside, never
# followed or emptied, and a fresh one made; 1 when that cannot be done.
base_make() {
	base_ok && return 0
	if [ -e "$B" ] || [ -L "$B" ]; then
		a="$B.moved.$$.$(date +%s)"
		mv -f -- "$B" "$a" 2>/dev/null || return 1
		echo "mbexec: moved aside '$B' (not a private directory) to '$a'" >&2
	fi
	mkdir -m 700 "$B" 2>/dev/null
	base_ok
}

# rep OO EO: one report of run R from byte offsets OO (stdout) and EO (stderr):
#   @mbx STATE RC OUTSIZE ERRSIZE INPOS OO ON EO EN, base64 of ON bytes of
#   out, @e, base64 of EN bytes of err, @end
# or the run's one-line result. The common case (everything from offset 0)
# costs one stat and one base64 per non-empty stream. At most MUXCAP raw
# bytes (default 640 KiB, stderr half of them): base64 of it stays under the
# 1 MiB output cap of an exec, also when a mount's poll carries many reports.
rep() {
	all=0
	if ! base_ok; then echo '@mbx gone'; return 0; fi
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
	cap=${MUXCAP:-655360}
	en=$((es - $2))
	[ $en -gt $((cap / 2)) ] && en=$((cap / 2))
	[ $en -lt 0 ] && en=0
	on=$((os - $1))
	[ $on -gt $((cap - en)) ] && on=$((cap - en))
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
		setsid -f /bin/sh "$B/sup-$V.sh" "$B" "$V" "${K:-600}" </dev/null >/dev/null 2>&1 || return 1
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
	base_ok || return 0
	if [ -d "$R" ] && [ ! -s "$R/rc" ] && [ ! -s "$R/result" ]; then
		echo 0 >"$R/idle"
		if [ -e "$R/ready" ] && [ ! -d "$R/started" ]; then
			dispatch
		fi
	fi
	return 0
}

# poll_setup R OO EO IPOS RECORD: before a poll of run R from offsets OO/EO
# (INPOS: stdin chunks known consumed, -1: not waiting for stdin): renew
# it, keep OO EO for --attach and as read (ack) when RECORD is 1, and note
# it for wait_any (WL: "R OO EO EV" per run, EV the size of R/ev), or flag
# it ready (.rdy) when something is new already. One stat per run. R/ev is
# measured before rc and in.pos are looked at: run.sh and the feeder write
# those first and then append to ev, so an event after the look shows in ev.
poll_setup() {
	R=$1
	base_ok || return 0
	# seen: where --attach starts; ack: what run.sh's pumps may drop
	[ "$5" = 1 ] && [ -d "$R" ] && echo "$2 $3" >"$R/seen" && echo "$2 $3" >"$R/ack"
	alive
	[ -e "$R/.rdy" ] && rm -f "$R/.rdy" 2>/dev/null
	[ -d "$R" ] || return 0
	# shellcheck disable=SC2046 # three numbers
	set -- "$2" "$3" "$4" $(stat -c %s "$R/out" "$R/err" "$R/ev" 2>/dev/null)
	if [ ! -s "$R/rc" ] && [ ! -s "$R/result" ]; then
		p=0
		[ -s "$R/in.pos" ] && read -r p <"$R/in.pos"
		if [ "${4:-0}" -le "$1" ] && [ "${5:-0}" -le "$2" ] &&
			{ [ "$3" -lt 0 ] || [ "$p" = "$3" ]; }; then
			: >"$R/.mark"
			WL="${WL:-} $R $1 $2 ${6:-0}"
			return 0
		fi
		: >"$R/.rdy"
	fi
	return 0
}

# poll_ready R INPOS: something new for run R since poll_setup (builtin
# tests only: it is checked every 50 ms).
# shellcheck disable=SC3013 # dash (and bash) have test -nt
poll_ready() {
	[ -e "$1/.rdy" ] || [ ! -d "$1" ] || [ -s "$1/rc" ] || [ -s "$1/result" ] ||
		[ "$1/out" -nt "$1/.mark" ] || [ "$1/err" -nt "$1/.mark" ] ||
		{ [ "$2" -ge 0 ] && [ "$1/in.pos" -nt "$1/.mark" ]; }
}

# wait_any WAIT STEPS CMD...: block until a run noted by poll_setup (WL)
# has output beyond its offsets or an event (R/ev grew: its end, stdin
# consumed), or the nudge file NF (when set: a mount whose shared poll has
# a new client) was written, or WAIT seconds passed. Nothing runs while
# nothing happens: a `tail -f` per file (inotify) writes into a pipe of this
# shell's, and one read of it waits, bounded by timeout(1); every helper is
# killed and waited for (the guest's PID 1 never reaps). CMD is for the
# fallback (no timeout(1) or mkfifo): checked every 50 ms, at most STEPS times.
wait_any() {
	case $1 in 0 | 0.000) return 0 ;; esac
	[ -n "${WL:-}${NF:-}" ] || return 0
	f="$B/.w.$$"
	if ! command -v timeout >/dev/null 2>&1 || ! mkfifo -m 600 "$f" 2>/dev/null; then
		wait_until "$@"
		return 0
	fi
	exec 7<>"$f"
	rm -f "$f"
	ws=
	if [ -n "${NF:-}" ]; then
		[ -e "$NF" ] || : >"$NF"
		tail -c +1 -f "$NF" >&7 2>/dev/null &
		ws=$!
	fi
	w=$1
	# shellcheck disable=SC2086 # words: R OO EO EV per run
	set -- ${WL:-}
	while [ $# -ge 4 ]; do
		tail -c +$(($2 + 1)) -f "$1/out" >&7 2>/dev/null &
		ws="$ws $!"
		tail -c +$(($3 + 1)) -f "$1/err" >&7 2>/dev/null &
		ws="$ws $!"
		tail -c +$(($4 + 1)) -f "$1/ev" >&7 2>/dev/null &
		ws="$ws $!"
		shift 4
	done
	timeout "$w" dd bs=1 count=1 of=/dev/null <&7 2>/dev/null
	# shellcheck disable=SC2086 # pids
	kill $ws 2>/dev/null
	# shellcheck disable=SC2086 # pids
	wait $ws 2>/dev/null
	exec 7<&-
	[ -n "${NF:-}" ] && rm -f "$NF"
	return 0
}

# wait_until WAIT STEPS CMD...: until CMD succeeds, checking every 50 ms,
# at most STEPS times and WAIT seconds of wall clock (a timer sleep, waited
# for: nothing is left behind). wait_any's fallback.
wait_until() {
	w=$1
	n=$2
	shift 2
	"$@" && return 0
	sleep "$w" >/dev/null 2>&1 &
	tp=$!
	i=0
	while [ $i -lt "$n" ] && kill -0 $tp 2>/dev/null && ! "$@"; do
		sleep 0.05
		i=$((i + 1))
	done
	kill $tp 2>/dev/null
	wait $tp 2>/dev/null
	return 0
}
