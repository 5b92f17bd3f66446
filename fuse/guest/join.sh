#!/bin/sh
# join.sh: assemble the parts of a large upload over its target (the last step of one).
#
# Usage: join.sh DIR TARGET TMP SHA256
# Concatenates DIR/p.* (mbfs PUT them as DIR/p.00000, p.00001, ...) into
# TMP, checks that the result's SHA-256 is SHA256 (hex), gives it TARGET's
# mode, renames it over TARGET, then removes DIR. Prints nothing. Exits 0
# when done; 3 when the checksum differs (a part went missing or changed:
# mbfs reports EIO); 1 on any other failure, with coreutils' message on
# stderr. TMP is removed on every failure; DIR only on success.
#
# TMP is next to TARGET (mbfs names it .mbfs-up-RANDOM in TARGET's
# directory): a rename within one directory is atomic, so readers see the
# old content or the new, never a part; DIR is in /tmp, which may be
# another filesystem. Repeatable as long as DIR exists, which is why DIR
# goes last: mbfs repeats a join whose answer was lost only after finding
# TARGET without SHA256's content.
#
# LC_ALL=C: p.* lists the parts in byte order, which is their numeric
# order, and the messages stay the English ones mbfs maps to errno.
export LC_ALL=C
d=$1 t=$2 a=$3 h=$4
cd "$d" || exit 1
fail() {
	rm -f "$a"
	exit "$1"
}
cat p.* >"$a" || fail 1
s=$(sha256sum <"$a") || fail 1
# sha256sum prints "HEX  -": compare the first field
if [ "${s%% *}" != "$h" ]; then
	echo 'checksum mismatch after joining the parts' >&2
	fail 3
fi
# keep the mode of the file we replace; a target removed meanwhile comes
# back private (600) rather than with whatever the guest's umask gives
if [ -e "$t" ]; then
	chmod --reference="$t" "$a"
else
	chmod 600 "$a"
fi || fail 1
mv -fT "$a" "$t" || fail 1
cd / && rm -rf "$d"
