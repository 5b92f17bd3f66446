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
# is absolute and below it. A directory on the way from ROOT to a PATH
# that is a symlink (the sandbox swapped it in, or a build tool did) would
# take the change out of the mounted directory, so the change is refused,
# with a line naming the path on stderr and exit status 4; so is a PATH
# that chmod or truncate would follow. The change is made from inside
# PATH's directory, entered one directory at a time from ROOT (see at), so
# a swap racing the check cannot redirect it either; a second path in
# another directory (mv, link) is checked only, a race there is not
# caught. The mounted directory itself may be a symlink.
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
# refuse $1 when its way is swapped (for a second path, whose directory
# is not entered)
check() {
	if swapped "$1"; then
		refuse "$1"
	fi
}
# Is the working directory (physically) ROOT or below it?
below() {
	[ "$top" = / ] && return 0
	case $(pwd -P) in
	"$top" | "$top"/*) return 0 ;;
	esac
	return 1
}
# at PATH: make PATH's directory the working directory and set n to PATH
# relative to it ("./NAME", or "." for ROOT itself). The directories are
# entered one at a time from ROOT, each refused when it is a symlink, and
# after each step the physical working directory must still lie below
# ROOT's, so a swap between the check and the cd is caught as well; the
# change is then made relative to that directory, so no later swap of a
# directory above it can lead it elsewhere.
at() {
	case $1 in
	"$root") ;;
	"$root"/*) ;;
	*) refuse "$1" ;;
	esac
	cd -P -- "${root:-/}" || exit 1
	top=$(pwd -P)
	if [ "$1" = "$root" ]; then
		n=.
		return 0
	fi
	rest=${1#"$root"}
	rest=${rest%/*}
	while [ -n "$rest" ]; do
		rest=${rest#/}
		c=${rest%%/*}
		rest=${rest#"$c"}
		[ -L "$c" ] && refuse "$1"
		if ! [ -d "$c" ]; then
			if [ -e "$c" ]; then
				echo "mbfs: cannot reach '$1': Not a directory" >&2
			else
				echo "mbfs: cannot reach '$1': No such file or directory" >&2
			fi
			exit 1
		fi
		cd -P -- "$c" || exit 1
		below || refuse "$1"
	done
	n=./${1##*/}
}
# at PATH, and refuse a symlink in PATH's own place too (chmod and
# truncate would follow it)
at_leaf() {
	at "$1"
	if [ "$n" != . ] && [ -L "$n" ]; then
		refuse "$1"
	fi
}
# FROM and TO for a two-path op: relative to FROM's directory, entered
# (at); TO as well when it is in the same directory, else checked
two() {
	at "$1"
	f=$n
	if [ "${1%/*}" = "${2%/*}" ]; then
		t=./${2##*/}
	else
		check "$2"
		t=$2
	fi
}
case $op in
rm)
	at "$1"
	exec rm -- "$n"
	;;
rmdir)
	at "$1"
	exec rmdir -- "$n"
	;;
mv | mvn)
	two "$1" "$2"
	over=
	if [ -e "$t" ] || [ -L "$t" ]; then
		if [ "$op" = mvn ]; then
			echo "mv: cannot move '$1' to '$2': File exists" >&2
			exit 1
		fi
		# one file under both names (hard links): mv refuses them,
		# rename(2) leaves both and succeeds
		i=$(stat -c %d:%i -- "$f" "$t" 2>/dev/null) &&
			[ "${i%%"$NL"*}" = "${i#*"$NL"}" ] && echo same && exit 0
		over=1
	fi
	mv -fT -- "$f" "$t" || exit 1
	[ -z "$over" ] || echo over
	;;
chmod)
	at_leaf "$2"
	exec chmod "$1" -- "$n"
	;;
truncate)
	at_leaf "$2"
	if ! [ -e "$n" ]; then
		echo "truncate: cannot open '$2': No such file or directory" >&2
		exit 1
	fi
	exec truncate -c -s "$1" -- "$n"
	;;
symlink)
	at "$2"
	exec ln -s -- "$1" "$n"
	;;
link)
	two "$1" "$2"
	exec ln -P -- "$f" "$t"
	;;
mkdir)
	at "$2"
	exec mkdir -m "$1" -- "$n"
	;;
*)
	echo "ns.sh: unknown operation '$op'" >&2
	exit 2
	;;
esac
