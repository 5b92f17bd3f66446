#!/bin/sh
# ns.sh: one namespace change of mbfs (rm, rmdir, mv, chmod, truncate, ln, mkdir), refused when its path leaves the mounted directory.
#
# Usage: ns.sh ROOT OP ARG...
#   rm PATH            unlink(2) PATH (never a directory)
#   rmdir PATH         rmdir(2) PATH
#   mv FROM TO         rename FROM over TO (mv -fT): prints "same" when
#                      the two are one file (hard links: nothing is done,
#                      as rename(2) does), "over" when TO was replaced
#   mvn FROM TO        the same, but never replaces TO (File exists)
#   chmod MODE PATH    MODE octal, special bits too
#   truncate SIZE PATH PATH must exist
#   symlink TEXT PATH  a symlink PATH holding TEXT
#   link FROM TO       a hard link TO of FROM (a symlink FROM itself)
#   mkdir MODE PATH    PATH's parent must exist
# ROOT is the guest path of the mounted directory ("" for /); every PATH
# is absolute and below it. Before anything is done, every directory on
# the way from ROOT to a PATH (and a PATH that chmod or truncate would
# follow) is checked: one that is a symlink (the sandbox swapped it in, or
# a build tool did) would take the change out of the mounted directory,
# so the change is refused, with a line naming the path on stderr and
# exit status 4. The mounted directory itself may be a symlink.
#
# Otherwise exits with the tool's status (0 when done) and coreutils'
# message on stderr, which mbfs maps to errno: LC_ALL=C keeps them English.
export LC_ALL=C
NL='
'
root=$1 op=$2
shift 2
refuse() {
	echo "mbfs: refused '$1': Too many levels of symbolic links" \
		"(a directory on its path is a symlink)" >&2
	exit 4
}
# Is a directory between ROOT and $1 (not $1 itself) a symlink?
swapped() {
	s=${1%/*}
	while [ "${#s}" -gt "${#root}" ]; do
		[ -L "$s" ] && return 0
		s=${s%/*}
	done
	return 1
}
# refuse $1 when its way is swapped; $2 "leaf": when $1 is a symlink too
check() {
	if swapped "$1"; then
		refuse "$1"
	fi
	if [ "${2-}" = leaf ] && [ "$1" != "$root" ] && [ -L "$1" ]; then
		refuse "$1"
	fi
}
case $op in
rm)
	check "$1"
	exec rm -- "$1"
	;;
rmdir)
	check "$1"
	exec rmdir -- "$1"
	;;
mv | mvn)
	check "$1"
	check "$2"
	over=
	if [ -e "$2" ] || [ -L "$2" ]; then
		if [ "$op" = mvn ]; then
			echo "mv: cannot move '$1' to '$2': File exists" >&2
			exit 1
		fi
		# one file under both names (hard links): mv refuses them,
		# rename(2) leaves both and succeeds
		i=$(stat -c %d:%i -- "$1" "$2" 2>/dev/null) &&
			[ "${i%%"$NL"*}" = "${i#*"$NL"}" ] && echo same && exit 0
		over=1
	fi
	mv -fT -- "$1" "$2" || exit 1
	[ -z "$over" ] || echo over
	;;
chmod)
	check "$2" leaf
	exec chmod "$1" -- "$2"
	;;
truncate)
	check "$2" leaf
	if ! [ -e "$2" ]; then
		echo "truncate: cannot open '$2': No such file or directory" >&2
		exit 1
	fi
	exec truncate -c -s "$1" -- "$2"
	;;
symlink)
	check "$2"
	exec ln -s -- "$1" "$2"
	;;
link)
	check "$1"
	check "$2"
	exec ln -P -- "$1" "$2"
	;;
mkdir)
	check "$2"
	exec mkdir -m "$1" -- "$2"
	;;
*)
	echo "ns.sh: unknown operation '$op'" >&2
	exit 2
	;;
esac
