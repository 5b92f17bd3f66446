#!/bin/sh
# run.sh: one mbexec run on the guest: the command in a session of its own, its stdin feeder, its exit status.
#
# Usage: run.sh RUNDIR        the run (started by sup.sh, once: `started`)
#        run.sh RUNDIR cmd    in the command's session: become the command
#        run.sh RUNDIR pty    inside script(1): size the terminal, become the command
#
# RUNDIR holds what the launch wrote: cwd, cmd (the script for /bin/sh -c),
# mode (none, embed: stdin in `in`, stream: stdin through `fifo`, pty: the
# same in a pseudo-terminal), winsz (pty: "COLS ROWS"), late (wait or
# nowait, below); this script writes pgid (the command's process group),
# main (the main process's status, 128+N after signal N), rc (the same, one
# write, once the output is complete) and wakes the waiting launch (SIGUSR1
# to the pid in `waiter`). The command, the feeder and the pumps are this
# shell's children, waited for here, so nothing is left for the guest's
# PID 1, which never reaps.
#
# Output ends as a local pipe's does: stdout and stderr are FIFOs that a
# pump per stream copies into the files out and err, and rc is written when
# every writer of both has closed them (a background job that keeps them
# open holds the run, as `| cat` and ssh wait for it), not when the main
# process exits. With late=nowait the command writes the files directly and
# rc follows the main process; what is written later stays in the files.
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

# At most OUTCAP bytes of a stream wait unread in its file: beyond that its
# pump stops reading, and the command's writes block as on a full pipe until
# the client has read more. What the client has is in `ack` ("OUT ERR",
# written by its polls and cuts); the bytes below it are punched out of the
# file (fallocate), which keeps its size, so offsets stay the same.
OUTCAP=16777216
PUNCH=
command -v fallocate >/dev/null 2>&1 && PUNCH=1

# pump FIFO FILE FIELD: copy FIFO into FILE until every writer has closed
# it, at most OUTCAP bytes ahead of field FIELD (1 stdout, 2 stderr) of ack.
# One dd per up to 256 reads (it writes what each read gets: head -c would
# wait for a whole buffer); fewer reads than it was given is end of file.
pump() {
	exec <"$1" || exit 0
	p=0
	while :; do
		a=0
		if read -r a1 a2 <ack 2>/dev/null; then
			[ "$3" = 1 ] && a=${a1:-0} || a=${a2:-0}
		fi
		if [ -n "$PUNCH" ] && [ "$a" -gt "$p" ]; then
			fallocate -p -o "$p" -l $((a - p)) "$2" 2>/dev/null
			p=$a
		fi
		s=$(stat -c %s "$2") || exit 0
		n=$((OUTCAP - s + a))
		if [ "$n" -le 0 ]; then
			sleep 0.2
			continue
		fi
		bs=65536
		[ "$n" -lt $bs ] && bs=$n
		c=$((n / bs))
		[ "$c" -gt 256 ] && c=256
		# "F+P records in": F full reads and P partial ones (after a
		# warning about partial reads, maybe)
		r=$(dd bs="$bs" count="$c" 2>&1 >>"$2") || exit 0
		r=${r%% records in*}
		r=${r##*[!0-9+]}
		[ $((${r%+*} + ${r#*+})) -lt "$c" ] && exit 0
	done
}

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
			echo >>ev
		elif [ -f in.eof ] && read -r n <in.eof && [ "$i" -ge "$n" ]; then
			exit 0
		elif [ -s main ]; then
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

lw='wait'
[ -s late ] && read -r lw <late
o=out
e=err
po=
pe=
if [ "$lw" != nowait ] && mkfifo -m 600 out.p err.p; then
	o=out.p
	e=err.p
	pump out.p out 1 </dev/null >/dev/null 2>&1 &
	po=$!
	pump err.p err 2 </dev/null >/dev/null 2>&1 &
	pe=$!
fi

# The command's redirections happen in its own shell: dash applies a simple
# command's redirections in the parent while it waits, and would then write
# its "Killed" notice into the command's stderr.
if [ "$m" = pty ]; then
	# shellcheck disable=SC2016 # expanded by the inner shell
	SHELL=/bin/sh setsid /bin/sh -c 'echo $$ >pgid; exec <"$1" >"$4" 2>&1;
		exec script -qfec "exec /bin/sh $2 $3 pty" /dev/null' mbexec-pty "$in" "$0" "$R" "$o"
else
	# shellcheck disable=SC2016 # expanded by the inner shell
	setsid /bin/sh -c 'echo $$ >pgid; exec <"$1" >"$4" 2>"$5";
		exec /bin/sh "$2" "$3" cmd' mbexec-cmd "$in" "$0" "$R" "$o" "$e"
fi
rc=$?
echo "$rc" >main
if [ -n "$fp" ]; then
	# a feeder still opening the FIFO (the command never read it) gets
	# its open, then EPIPE
	exec 4<>fifo
	exec 4<&-
	wait "$fp"
fi
if [ -n "$po" ]; then
	# a pump still opening its FIFO (nothing ever wrote to it, as err in a
	# pty) gets its open, then end of file; one that other writers hold
	# open goes on until they close it
	exec 5<>out.p 6<>err.p
	exec 5<&- 6<&-
	wait "$po"
	wait "$pe"
	rm -f out.p err.p
fi
echo "$rc" >rc
# a waiting poll wakes (lib.sh, wait_any)
echo >>ev
w=
read -r w <waiter 2>/dev/null && [ -n "$w" ] && kill -USR1 "$w" 2>/dev/null
exit 0
