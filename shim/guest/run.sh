#!/bin/sh
# run.sh: one mbexec run on the guest: the command in a session of its own, its stdin feeder, its exit status.
#
# Usage: run.sh RUNDIR        the run (started by sup.sh, once: `started`)
#        run.sh RUNDIR cmd    in the command's session: become the command
#        run.sh RUNDIR pty    inside script(1): size the terminal, become the command
#
# RUNDIR holds what the launch wrote: cwd, cmd (the script for /bin/sh -c),
# mode (none, embed: stdin in `in`, stream: stdin through `fifo`, pty: the
# same in a pseudo-terminal), winsz (pty: "COLS ROWS"); this script writes
# pgid (the command's process group), rc (its status, 128+N after signal N,
# one write) and wakes the waiting launch (SIGUSR1 to the pid in `waiter`).
# The command and the feeder are this shell's children, waited for here, so
# nothing is left for the guest's PID 1, which never reaps.
# Our machinery runs in a clean shell (no profile, a fixed PATH); the
# user's command does not: it gets the environment the login shell of the
# launch had (R/env, its `export -p`), as a command run over ssh gets the
# login environment, and starts as `/bin/sh -c CMD` as it always did.
R=$1
cd "$R" || exit 1

# become: the user's command, in its directory, with its environment (and,
# in a pty, the client's TERM, which wins over the login shell's)
become() {
	c=$(cat cwd; echo x)
	s=$(cat cmd; echo x)
	e=
	[ -f env ] && e=$(cat env)
	t=
	[ "${1:-}" = pty ] && [ -f term ] && t=$(cat term)
	cd "${c%x}" || exit 1
	# shellcheck disable=SC2016 # expanded by the new shell
	exec /usr/bin/env -i /bin/sh -c 'eval "$1"; [ -z "$3" ] || export TERM="$3"
		exec /bin/sh -c "$2"' mbexec "$e" "${s%x}" "$t"
}

case ${2:-} in
cmd) become ;;
pty)
	read -r cols rows <winsz && stty cols "$cols" rows "$rows" 2>/dev/null
	tty >tty.t 2>/dev/null && mv -f tty.t tty
	echo $$ >ptypid
	become pty
	;;
esac

mkdir started 2>/dev/null || exit 0

# feed: copy the uploaded chunks in.000000, in.000001... into the FIFO in
# order, counting them in in.pos; stop after in.eof's count, or when the
# command has ended (rc), or when nobody reads the FIFO any more. Chunks
# already there in a row go in one cat and one rm (at most 16): a process
# per chunk would make the guest, not the network, the limit.
feed() {
	exec >fifo || exit 0
	i=0
	while :; do
		set --
		j=$i
		while [ $# -lt 16 ]; do
			n=$((1000000 + j))
			[ -f "in.${n#1}" ] || break
			set -- "$@" "in.${n#1}"
			j=$((j + 1))
		done
		if [ $# -gt 0 ]; then
			cat "$@" || exit 0
			rm -f "$@"
			i=$j
			echo "$i" >in.pos.t && mv -f in.pos.t in.pos
		elif [ -f in.eof ] && read -r n <in.eof && [ "$i" -ge "$n" ]; then
			exit 0
		elif [ -s rc ]; then
			exit 0
		else
			sleep 0.02
		fi
	done
}

read -r m <mode
in=/dev/null
fp=
case $m in
embed) in=in ;;
stream | pty)
	in=fifo
	feed </dev/null 2>/dev/null &
	fp=$!
	;;
esac

# The command's redirections happen in its own shell: dash applies a simple
# command's redirections in the parent while it waits, and would then write
# its "Killed" notice into the command's stderr.
if [ "$m" = pty ]; then
	# shellcheck disable=SC2016 # expanded by the inner shell
	SHELL=/bin/sh setsid /bin/sh -c 'echo $$ >pgid; exec <"$1" >out 2>&1;
		exec script -qfec "exec /bin/sh $2 $3 pty" /dev/null' mbexec-pty "$in" "$0" "$R"
else
	# shellcheck disable=SC2016 # expanded by the inner shell
	setsid /bin/sh -c 'echo $$ >pgid; exec <"$1" >out 2>err;
		exec /bin/sh "$2" "$3" cmd' mbexec-cmd "$in" "$0" "$R"
fi
rc=$?
echo "$rc" >rc
if [ -n "$fp" ]; then
	# a feeder still opening the FIFO (the command never read it) gets
	# its open, then EPIPE
	exec 4<>fifo
	exec 4<&-
	wait "$fp"
fi
w=
read -r w <waiter 2>/dev/null && [ -n "$w" ] && kill -USR1 "$w" 2>/dev/null
exit 0
