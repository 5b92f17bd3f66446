#!/bin/sh
# resize.sh: set a pty run's terminal size (its foreground job gets SIGWINCH).
#
# Usage (after lib.sh): resize.sh COLS ROWS
# shellcheck disable=SC2154 # B, V and R are set by the caller
base_ok || { echo '@mbx gone'; exit 0; }
echo "$1 $2" >"$R/winsz" 2>/dev/null
t=
[ -s "$R/tty" ] && read -r t <"$R/tty"
[ -n "$t" ] && stty -F "$t" cols "$1" rows "$2" 2>/dev/null
echo '@mbx ack resized'
