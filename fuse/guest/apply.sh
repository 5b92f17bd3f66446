#!/bin/sh
# apply.sh: put a batch of small files in place (write-back, fuse/wbsend.c).
#
# Usage: apply.sh PARTS NPARTS STAGE PREV [LIST]
# PARTS.00000 ... (NPARTS of them, in the mount's own private directory
# /tmp/.mbfs-wb-RANDOM, which must be a directory, not a symlink) are the
# 1 MiB pieces of one tar archive that mbfs PUT. A batch of names only
# (removals, moves, mkdirs, modes and times, no file) comes in the command
# itself: NPARTS "-" and LIST, the text of its "list" (the directory is
# made, mode 700, when missing). The archive holds a member "list", then
# for each file a member "G/NAME" carrying its mode and mtime. list starts
# with the removals, done in their order before anything else: a line
# "rPATH" unlinks the file or symlink PATH (an absolute guest path),
# maybe after a line "bBASE" that says what it must still be ("SIZE
# MTIME", as below; otherwise it is a conflict and the file stays), and a
# line "RPATH" removes the empty directory PATH; a PATH gone already counts
# as removed, one whose way passes through a symlink below the mounted
# directory is refused. A line "iID LEDGER", a line "vFROM" and a line
# "VTO" rename the file FROM over TO (rename(2), in order with the
# removals; a TO that is a directory, a FROM that is gone or a directory,
# or one of them whose way passes through such a symlink, fails it). ID
# names the move for good: once done it goes in the ledger "moves" of
# PARTS's directory, and a move the ledger there or in LEDGER (a killed
# mount's batch directory, or "-") holds is not done again (a rerun after
# a lost answer, or a replay after a crash, would move what took FROM's
# name since). A line "pMODE PATH", maybe after a "b" line (as a
# removal's), gives the regular file PATH the mode MODE (octal), in order
# with them; a PATH gone, not a regular file, with other hard links (one
# may be outside the mounted directory), not its base, or a way through a
# swapped symlink fails it. Then comes a line "mMODE DIR" for each directory
# to make (an absolute guest
# path; its parent exists or is made by an earlier line), made with mode
# MODE (octal) before anything else; a name that is taken already (even
# by a directory) fails that line. A line "MMODE DIR" is the same for a
# directory that an earlier batch whose answer was lost may have made:
# a real directory there counts as made when it holds nothing but names
# this batch puts in it. Then a line "dDIR" (an absolute guest
# directory; "d" alone is /) opens group G (0, 1, ... in list order),
# followed by a line "fNAME" for each file of the group, NAME a file name
# in DIR (never a '/' or a newline), maybe after a line "bBASE" that says
# what DIR/NAME must still be for the file to replace it: "-" (nothing
# there) or "SIZE MTIME" (bytes and whole seconds); otherwise it is a
# conflict: the sandbox's file stays and this one is reported, unless it
# holds the same bytes as this one (an earlier batch whose answer was
# lost put it there): then this one goes in place. A line "k" before a
# "f" line says the file keeps the mode of the file it replaces (a
# replay after a crash, which does not know it), not its member's. Or by a
# line "tTIME": give DIR the
# modification time TIME (a touch -d value), or by a line "cMODE": give DIR
# the mode MODE, each after the files before it are in place (their
# renames moved the time). A time or a mode that cannot be set is left
# (DIR may be gone). Nothing goes into or changes a DIR that is a symlink
# (another client swapped it in; the mounted directory itself may be one)
# or that an "m" line could not make, nor below one: every act (a rename
# into place, a mkdir, a removal, a mode, a time) is made from inside its
# directory, entered (enter), by a name in it, so a swap racing the
# checks leads nothing out either.
#
# The archive is unpacked into STAGE, a hidden directory (.mbfs-up-HEX)
# in the mounted directory, so on the files' filesystem; then each
# group's files are renamed into DIR by one `mv -f` (rename(2)): a reader
# sees the old file or the new one, never a part of it. A target that is
# a directory, or a DIR that is gone, fails that file alone; so does a
# symlink target without perl (with it, the symlink itself is replaced).
#
# Prints "z I WHY" for each removal or move I (0-based, in list order)
# not done, "w I" for a move whose two names are one file (hard links:
# like rename(2), it leaves both),
# "y I WHY" for each directory I (0-based, in list order) not made,
# "x I conflict: ..." for each file whose base did not hold,
# "x I WHY" for each file I not put in place, then "ok COUNT" (the files). The report is left in PARTS.done too: a rerun
# with the same arguments (mbfs lost the answer) prints it again and
# applies nothing twice. PREV ("-" for none) is the report of an earlier
# batch, no longer needed. Exits 0 with a report; 3 when a part is
# missing; 5 when PARTS's directory is no longer a directory of ours
# (swapped for a link: the parts found through it are removed); 1 on any
# other failure (tar's message on stderr). STAGE and
# the parts are removed in every case.
#
# The first batch of a mount (PREV "-") also sweeps the staging that
# killed mounts left in /tmp and no journal names any more: every upload
# directory (.mbfs-up-*), batch directory (.mbfs-wb-*) and the legacy
# /tmp/.mbfs-up of older versions in which nothing changed for an hour
# (a live mount's, mid-transfer, changes with every part), and the
# legacy wb-*.done reports an hour old; never through a symlink.
export LC_ALL=C
NL='
'
p=$1 np=$2 sd=$3 prev=$4 inl=${5-}
bd=${p%/*}
if [ "$np" = - ] && ! [ -e "${p%/*}" ] && ! [ -L "${p%/*}" ] &&
	! [ -L "${bd%/*}" ]; then
	# a batch of names only comes in the command: no PUT made the
	# directory yet (a mkdir fails on a name someone took meanwhile)
	mkdir -m 700 -- "${p%/*}" 2>/dev/null || :
fi
if [ -L "${p%/*}" ] || ! [ -d "${p%/*}" ] || [ -L "${bd%/*}" ]; then
	# swapped for a link since the mount made it: the PUTs followed it;
	# take back what they left there (our random names only), and say so
	# (exit 5): the mount picks a fresh directory for its next batch
	rm -f -- "$p".[0-9]* 2>/dev/null
	echo "the batch directory '${p%/*}' is not a directory of ours" >&2
	exit 5
fi
# The first batch's sweep (PREV "-", once the list is there): never the
# batch directory of a killed mount whose ledger an "i" line names.
sweep() {
	[ "$prev" = - ] || return 0
	named=$(sed -n 's/^i[0-9a-f]* //p' "$sd/list")
	for x in /tmp/.mbfs-up /tmp/.mbfs-up-* /tmp/.mbfs-wb-*; do
		if [ "$x" = "${p%/*}" ] || [ -L "$x" ] || ! [ -d "$x" ] ||
			printf '%s\n' "$named" | grep -Fxq -- "$x"; then
			continue
		fi
		if [ -z "$(find "$x" -mmin -60 -print 2>/dev/null | head -n 1)" ]; then
			rm -rf -- "$x"
		elif [ "$x" = /tmp/.mbfs-up ]; then
			find "$x" -maxdepth 1 -name 'wb-*.done' -mmin +60 \
				-exec rm -f -- {} + 2>/dev/null
		fi
	done
}
[ "$prev" = - ] || rm -f -- "$prev"
sdn=$sd
cleanup() {
	rm -rf -- "$sdn"
	rm -f -- "$p".[0-9]*
}
if [ -f "$p.done" ]; then
	cleanup
	cat -- "$p.done"
	exit 0
fi
set --
i=0
while [ "$np" != - ] && [ "$i" -lt "$np" ]; do
	f=$(printf '%s.%05d' "$p" "$i")
	if ! [ -f "$f" ]; then
		echo "part $i of the batch is missing" >&2
		cleanup
		exit 3
	fi
	set -- "$@" "$f"
	i=$((i + 1))
done
rm -rf -- "$sd"
# The stage is held by a descriptor once made: its name may be swapped for
# a symlink (the archive would unpack where it points, maybe outside), the
# descriptor cannot. It is used through /proc when that is the directory
# made (physically where it was made); without /proc, by its name.
stage() {
	mkdir -- "$sd" && command exec 9<"$sd" || return 1
	[ -d "/proc/$$/fd/9/" ] || return 0
	at=$(cd -P -- "${sd%/*}/" 2>/dev/null && pwd -P) &&
		(cd -P -- "/proc/$$/fd/9" && [ "$PWD" = "${at%/}/${sd##*/}" ]) ||
		return 1
	sd=/proc/$$/fd/9
}
if [ "$np" = - ]; then
	if ! stage || ! printf '%s' "$inl" >"$sd/list" ||
		! : >"$sd/made"; then
		cleanup
		exit 1
	fi
elif ! stage || ! cat -- "$@" | tar -x -p --no-same-owner -f - -C "$sd" ||
	! : >"$sd/made"; then
	cleanup
	exit 1
fi
sweep
# the directories an "m" line could not make, one a line
bad=
# Is $1 one of them, or below one?
unmade() {
	[ -n "$bad" ] || return 1
	printf '%s\n' "$bad" | {
		while IFS= read -r b; do
			[ -n "$b" ] || continue
			case $1 in "$b" | "$b"/*) exit 0 ;; esac
		done
		exit 1
	}
}
# Does the path $1 pass through a symlink below the mounted directory (one
# another client put in place of a directory)? The mount's paths never do;
# the mounted directory itself may be one.
root=${sdn%/*}
# The mounted directory physically (it may be a symlink itself).
top=$(cd -P -- "${root:-/}" 2>/dev/null && pwd -P) || top=
# enter DIR: make DIR (the mounted directory or one below it) the working
# directory, only when it is that directory physically at the moment of
# the cd: no symlink on its way from the mounted directory, which another
# client may swap in just before (a check before the act cannot see a
# swap that races it). What is then done by a name relative to it stays
# in it, whatever is swapped above it afterwards.
enter() {
	want=${top%/}${1#"$root"}
	[ -n "$top" ] && cd -P -- "${1:-/}" 2>/dev/null && [ "$PWD" = "${want:-/}" ]
}
swapped() {
	s=$1
	while [ "${#s}" -gt "${#root}" ]; do
		[ -L "$s" ] && return 0
		s=${s%/*}
	done
	return 1
}
# why: why files may not go into $dir ("" when they may): gone, not made,
# or a symlink put in its place or above it
refusal() {
	why=
	if unmade "$dir"; then
		why="its directory could not be made"
	elif ! [ -d "$dir" ]; then
		why="no such directory"
	elif swapped "$dir"; then
		why="its directory is a symlink"
	fi
}
# The directories of "m" lines with one mode are made by one process
# (arguments: the directories; pend: "INDEX DIR" lines of them): a storm
# of new directories (git's objects/XX) costs one process, not one each.
# Each is made from inside its parent, entered (enter). mkdir fails on a
# name that is there, so when all succeed every one of them is ours; when
# one fails, which ones another client made meanwhile cannot be told, and
# none of them takes files.
pend=
mkdirs() {
	[ $# -gt 0 ] || return 0
	if [ -n "$byperl" ]; then
		err=$(perl -e 'use Cwd ();
		my ($root, $top, $mode) = splice(@ARGV, 0, 3);
		for my $d (@ARGV) {
			my ($pd, $n) = $d =~ m{\A(.*)/([^/]+)\z} or die "$d: bad\n";
			my $want = ($top eq "/" ? "" : $top) .
			    substr($pd, length $root);
			chdir($pd eq "" ? "/" : $pd) or die "$d: $!\n";
			die "$d: a directory above it is a symlink\n"
			    unless (Cwd::getcwd() // "") eq ($want eq "" ? "/" : $want);
			mkdir($n, 0700) or die "$d: $!\n";
			chmod(oct($mode), $n) or die "$d: $!\n";
		}' "$root" "$top" "$mmode" "$@" 2>&1)
	else
		err=
		for d; do
			if ! [ -e "${d%/*}/" ]; then
				err="$d: No such file or directory"
			elif ! [ -d "${d%/*}/" ]; then
				err="$d: Not a directory"
			elif ! enter "${d%/*}"; then
				err="$d: a directory above it is a symlink"
			elif ! err=$(mkdir -m "$mmode" -- "./${d##*/}" 2>&1); then
				:
			else
				continue
			fi
			break
		done
	fi
	if [ -n "$err" ]; then
		printf '%s' "$pend" | while IFS=' ' read -r i d; do
			echo "y $i ${err##*: }"
		done >>"$sd/made"
		for d; do
			bad="$bad$d
"
		done
	fi
	pend=
}
# The renames: with perl (every Debian-based image has it: perl-base is
# essential there) one process renames the batch's files, named in
# $sd/pairs (source, directory, name, NUL-ended); without it, one mv per
# directory, its files piled up in "$@". Both are a rename(2) each, into
# the directory entered (enter). A rename that fails leaves its file
# staged, which the report says.
# Each pair carries the file's base ("" for none) and its "k" mark ("" for
# none): a target that no longer matches the base is not replaced, and its
# staged name goes to
# $sd/conflicts (one a line) for the report.
: >"$sd/conflicts"
byperl=
if command -v perl >/dev/null 2>&1; then
	byperl=1
	exec 3>"$sd/pairs"
	renames() {
		exec 3>&-
		perl -0 -e 'use Cwd ();
		my ($cf, $root, $top) = @ARGV;
		open(my $c, ">>", $cf) or die;
		my ($cur, $in) = ("", 0);
		while (defined(my $s = <STDIN>)) {
			my $d = <STDIN>; my $t = <STDIN>; my $b = <STDIN>;
			my $k = <STDIN>;
			chomp($s, $d, $t, $b, $k);
			if ($d ne $cur) {
				# as enter in the shell: that directory, physically
				my $w = ($top eq "/" ? "" : $top) .
				    substr($d, length $root);
				$cur = $d;
				$in = chdir($d) &&
				    (Cwd::getcwd() // "") eq ($w eq "" ? "/" : $w);
			}
			next unless $in;   # stays staged: the report says why
			my @st = lstat($t);
			my $now = @st ? "$st[7] $st[9]" : "-";
			if ($b ne "" && $b ne $now && !same($s, $t)) {
				print $c "$s\n";
				next;
			}
			chmod($st[2] & 07777, $s) if $k ne "" && @st && -f _;
			rename($s, $t);
		}
		# do $src (staged) and $dst (the target, a regular file) hold
		# the same bytes?
		sub same {
			my ($src, $dst) = @_;
			my @x = stat($src);
			my @y = lstat($dst);
			return 0 unless @x && @y && -f _ && $x[7] == $y[7];
			open(my $f, "<", $src) or return 0;
			open(my $g, "<", $dst) or return 0;
			binmode $f;
			binmode $g;
			for (;;) {
				my $n = read($f, my $p, 65536);
				my $m = read($g, my $q, 65536);
				return 0 unless defined $n && defined $m &&
				    $n == $m && $p eq $q;
				return 1 if $n == 0;
			}
		}' "$sd/conflicts" "$root" "$top" <"$sd/pairs"
		exec 3>"$sd/pairs"
	}
else
	renames() { :; }
fi
# Without perl: the staged files "$@" into $dir, entered, by one mv.
into() {
	[ $# -eq 0 ] || { enter "$dir" && mv -f -- "$@" ./; } 2>/dev/null || :
}
# Without perl: does DIR/NAME ($1) still match base?
based() {
	[ -n "$base" ] || return 0
	if [ "$base" = - ]; then
		! [ -e "$1" ] && ! [ -L "$1" ]
		return
	fi
	[ "$(stat -c '%s %Y' -- "$1" 2>/dev/null)" = "$base" ]
}
# Does the directory $1, there already for an "M" line, hold only names
# this batch puts in it (the files of its group, the directories made in
# it)? The run whose answer was lost left it so; anything else is someone
# else's, and the files written in the new one must not land among theirs.
only_ours() {
	names=$(D=$1 awk '
		substr($0, 1, 1) == "d" { g = (substr($0, 2) == ENVIRON["D"]); next }
		g && substr($0, 1, 1) == "f" { print substr($0, 2); next }
		/^[mM][0-7]+ / {
			p = $0
			sub(/^[mM][0-7]+ /, "", p)
			n = length(ENVIRON["D"])
			if (substr(p, 1, n + 1) == ENVIRON["D"] "/" &&
				index(substr(p, n + 2), "/") == 0)
				print substr(p, n + 2)
		}' "$sd/list") || return 1
	for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
		[ -e "$e" ] || [ -L "$e" ] || continue
		printf '%s\n' "$names" | grep -Fxq -- "${e##*/}" || return 1
	done
	return 0
}
# Without perl: do the staged $1 and the target $2 (a regular file) hold
# the same bytes?
same() {
	[ -f "$2" ] && ! [ -L "$2" ] && cmp -s -- "$1" "$2"
}
# The removals and moves, in order, all before the rest of the list: with
# perl one process does them all; without it, one rm, rmdir or mv each.
if [ -n "$byperl" ]; then
	perl -e 'use Cwd (); use Fcntl;
	my ($root, $list, $out, $cur, $top) = @ARGV;
	open(my $in, "<", $list) or die; open(my $o, ">>", $out) or die;
	# enter the directory of the path $_[0], as enter in the shell does:
	# its name in it, "" when the directory is gone, undef when it is not
	# that directory physically (a symlink swapped in)
	my $enter = sub {
		my ($d, $n) = $_[0] =~ m{\A(.*)/([^/]*)\z} or return undef;
		my $w = ($top eq "/" ? "" : $top) . substr($d, length $root);
		return "" unless chdir($d eq "" ? "/" : $d);
		return (Cwd::getcwd() // "") eq ($w eq "" ? "/" : $w)
		    ? "./$n" : undef;
	};
	my ($i, $base, $mid, $mdir) = (0, "", "", "");
	# the moves a run of this mount (or of the killed one an "i" line
	# names) did already: a rerun after a lost answer does none twice
	my (%done, %read);
	my $ledger = sub {
		my $d = shift;
		return if $read{$d}++ || -l $d || !-d _;
		open(my $f, "<", "$d/moves") or return;
		while (my $x = <$f>) { chomp $x; $done{$x} = 1; }
	};
	$ledger->($cur);
	while (my $l = <$in>) {
		chomp $l;
		my ($k, $p) = (substr($l, 0, 1), substr($l, 1));
		if ($k eq "b") { $base = $p; next; }
		if ($k eq "i") {
			($mid, $mdir) = split(/ /, $p, 2);
			$mid = "" if $mid eq "-";
			$mdir = "" unless $mdir =~ m{\A/tmp/\.mbfs-wb-[0-9a-f]+\z};
			$ledger->($mdir) if $mdir ne "";
			next;
		}
		last unless $k eq "r" || $k eq "R" || $k eq "v" || $k eq "p";
		my $pm;
		($pm, $p) = split(/ /, $p, 2) if $k eq "p";
		my ($b, $why, $s) = ($base, "", $p);
		$base = "";
		my $to = "";
		if ($k eq "v") {
			my $t = <$in>;
			chomp $t if defined $t;
			die "a move without its target\n"
			    unless defined $t && substr($t, 0, 1) eq "V";
			$to = substr($t, 1);
		}
		for my $w ($k eq "v" ? ($p, $to) : ($p)) {
			($s = $w) =~ s{/[^/]*\z}{};
			while ($why eq "" && length($s) > length($root)) {
				$why = "a directory above it is a symlink" if -l $s;
				$s =~ s{/[^/]*\z}{};
			}
		}
		# acts by a name in the directory entered, for a move the
		# directory of its target: its source is checked above only (a
		# swap there can bring a file in, never send one out)
		my $at = $why eq "" ? $enter->($k eq "v" ? $to : $p) : "";
		if (!defined $at) {
			$why = "a directory above it is a symlink";
			$at = "";
		}
		my @st = $why ne "" ? () : $k eq "v" ? lstat($p) :
		    $at ne "" ? lstat($at) : ();
		$why = "No such file or directory"
		    if $k eq "v" && $why eq "" && $at eq "" && !$done{$mid};
		if ($k eq "p") {
			if ($why ne "") {
			} elsif (!@st) {
				$why = "No such file or directory";
			} elsif (-l _) {
				$why = "a symlink is in its place";
			} elsif (!-f _) {
				$why = "not a regular file";
			} elsif ($st[3] > 1) {
				# another name, maybe outside, shares the inode
				$why = "it has other hard links";
			} elsif ($b ne "" && $b ne "$st[7] $st[9]") {
				$why = "conflict: the file changed on the sandbox " .
				    "since the mount changed its mode";
			} else {
				# by an fd opened without following a link, and
				# still that file: a swap since the checks would
				# chmod the target of a link, maybe outside
				my $fh;
				if (sysopen($fh, $at, O_RDONLY | O_NOFOLLOW |
					    O_NONBLOCK)) {
					my @ft = stat($fh);
					if (!@ft || $ft[0] != $st[0] ||
					    $ft[1] != $st[1]) {
						$why = "it changed while its mode " .
						    "was set";
					} else {
						chmod(oct($pm), $fh) or $why = "$!";
					}
					close($fh);
				} elsif ($!{EACCES}) {
					# unreadable: by its name, checked above
					chmod(oct($pm), $at) or $why = "$!";
				} else {
					$why = "$!";
				}
			}
		} elsif ($k eq "v" && $done{$mid}) {
			# done by the run whose answer was lost
		} elsif ($k eq "v") {
			my $dir = @st && -d _;
			my @tt = @st ? lstat($at) : ();
			if ($why ne "") {
			} elsif (!@st) {
				$why = "No such file or directory";
			} elsif ($dir) {
				$why = "Is a directory";
			} elsif (@tt && -d _) {
				$why = "Is a directory";
			} elsif (@tt && $tt[0] == $st[0] && $tt[1] == $st[1]) {
				print $o "w $i\n";   # rename(2) leaves both
			} elsif (rename($p, $at)) {
				# also in the ledger the journal names, which
				# a later replay reads (this mount may die too;
				# the killed one may never have made it)
				mkdir($mdir, 0700) if $mdir ne "" && !-e $mdir &&
				    !-l $mdir;
				for my $d ($mdir ne "" && -d $mdir && !-l $mdir
					   ? ($cur, $mdir) : ($cur)) {
					next if $mid eq "";
					open(my $m, ">>", "$d/moves") or next;
					print $m "$mid\n";
					close($m);
				}
			} else {
				$why = "$!";
			}
			($mid, $mdir) = ("", "");
		} elsif (!@st) {
		} elsif ($k eq "R") {
			rmdir($at) or $why = "$!";
		} elsif (-d _) {
			$why = "Is a directory";
		} elsif ($b ne "" && $b ne "$st[7] $st[9]") {
			$why = "conflict: the file changed on the sandbox since " .
			    "the mount removed it";
		} else {
			unlink($at) or $why = "$!";
		}
		print $o "z $i $why\n" if $why ne "";
		$i++;
	}' "$root" "$sd/list" "$sd/made" "${p%/*}" "$top"
else
	ri=0
	mid=
	mdir=${p%/*}
	base=
	while IFS= read -r l; do
		k=${l%"${l#?}"} v=${l#?}
		if [ "$k" = b ]; then
			base=$v
			continue
		fi
		if [ "$k" = i ]; then
			mid=${v%% *} mdir=${v#* }
			case $mdir in /tmp/.mbfs-wb-*) ;; *) mdir=${p%/*} ;; esac
			! [ -L "$mdir" ] || mdir=${p%/*}
			[ "$mid" != - ] || mid=
			continue
		fi
		if [ "$k" = v ]; then
			from=$v
			continue
		fi
		[ "$k" = r ] || [ "$k" = R ] || [ "$k" = V ] || [ "$k" = p ] || break
		if [ "$k" = p ]; then
			pm=${v%% *} v=${v#* }
			if swapped "${v%/*}"; then
				echo "z $ri a directory above it is a symlink"
			elif [ -L "$v" ]; then
				echo "z $ri a symlink is in its place"
			elif ! [ -e "$v" ]; then
				echo "z $ri No such file or directory"
			elif ! [ -f "$v" ]; then
				echo "z $ri not a regular file"
			elif [ "$(stat -c %h -- "$v" 2>/dev/null)" != 1 ]; then
				echo "z $ri it has other hard links"
			elif ! based "$v"; then
				echo "z $ri conflict: the file changed on the sandbox" \
					"since the mount changed its mode"
			elif ! enter "${v%/*}"; then
				echo "z $ri a directory above it is a symlink"
			else
				err=$(chmod "$pm" -- "./${v##*/}" 2>&1) ||
					echo "z $ri ${err##*: }"
			fi
			base=
			ri=$((ri + 1))
			continue
		fi
		if [ "$k" = V ]; then
			t=$(stat -c %d:%i -- "$from" "$v" 2>/dev/null) || t=
			if [ -n "$mid" ] &&
				grep -Fxqs -- "$mid" "${p%/*}/moves" "$mdir/moves"; then
				: # done by the run whose answer was lost
			elif swapped "${from%/*}" || swapped "${v%/*}"; then
				echo "z $ri a directory above it is a symlink"
			elif ! [ -e "$from" ] && ! [ -L "$from" ]; then
				echo "z $ri No such file or directory"
			elif [ -d "$from" ] && ! [ -L "$from" ]; then
				echo "z $ri Is a directory"
			elif [ -d "$v" ] && ! [ -L "$v" ]; then
				echo "z $ri Is a directory"
			elif [ -n "$t" ] && [ "${t%%"$NL"*}" = "${t#*"$NL"}" ]; then
				echo "w $ri" # rename(2) leaves both
			elif ! enter "${v%/*}"; then
				echo "z $ri a directory above it is a symlink"
			elif err=$(mv -fT -- "$from" "./${v##*/}" 2>&1); then
				# also in the ledger the journal names (this
				# mount may die too)
				if [ -n "$mid" ]; then
					printf '%s\n' "$mid" >>"${p%/*}/moves"
					if [ "$mdir" != "${p%/*}" ]; then
						[ -e "$mdir" ] || [ -L "$mdir" ] ||
							mkdir -m 700 -- "$mdir" 2>/dev/null
						if [ -d "$mdir" ] && ! [ -L "$mdir" ]; then
							printf '%s\n' "$mid" >>"$mdir/moves"
						fi
					fi
				fi
			else
				echo "z $ri ${err##*: }"
			fi
			mid='' mdir=${p%/*}
			ri=$((ri + 1))
			continue
		fi
		if swapped "${v%/*}"; then
			echo "z $ri a directory above it is a symlink"
		elif ! [ -e "$v" ] && ! [ -L "$v" ]; then
			:
		elif ! enter "${v%/*}"; then
			echo "z $ri a directory above it is a symlink"
		elif [ "$k" = R ]; then
			err=$(rmdir -- "./${v##*/}" 2>&1) || echo "z $ri ${err##*: }"
		elif [ -d "$v" ] && ! [ -L "$v" ]; then
			echo "z $ri Is a directory"
		elif ! based "$v"; then
			echo "z $ri conflict: the file changed on the sandbox" \
				"since the mount removed it"
		else
			err=$(rm -f -- "./${v##*/}" 2>&1) || echo "z $ri ${err##*: }"
		fi
		base=
		ri=$((ri + 1))
	done <"$sd/list" >>"$sd/made"
fi
set --
g=-1
dir=/
why=
mi=0
mmode=
base=
keep=
while IFS= read -r l; do
	k=${l%"${l#?}"} v=${l#?}
	if [ "$k" != m ] && [ "$k" != M ] && [ -n "$pend" ]; then
		mkdirs "$@"
		set --
	fi
	if [ "$k" = m ] || [ "$k" = M ]; then
		# one there already is someone else's (even a directory): the
		# files written in the new one must not land among theirs
		md=${v#* }
		if [ "${v%% *}" != "$mmode" ] && [ -n "$pend" ]; then
			mkdirs "$@"
			set --
		fi
		mmode=${v%% *}
		if unmade "$md"; then
			echo "y $mi its parent could not be made" >>"$sd/made"
		elif swapped "${md%/*}"; then
			echo "y $mi a directory above it is a symlink" >>"$sd/made"
			bad="$bad$md
"
		elif [ "$k" = M ] && [ -d "$md" ] && ! [ -L "$md" ] &&
			only_ours "$md"; then
			: # made by the batch whose answer was lost
		elif [ -e "$md" ] || [ -L "$md" ]; then
			echo "y $mi File exists" >>"$sd/made"
			bad="$bad$md
"
		else
			set -- "$@" "$md"
			pend="$pend$mi $md
"
		fi
		mi=$((mi + 1))
	elif [ "$k" = c ]; then
		into "$@"
		set --
		renames
		[ -n "$why" ] || { enter "$dir" && chmod "$v" .; } 2>/dev/null || :
	elif [ "$k" = d ]; then
		into "$@"
		set --
		g=$((g + 1))
		dir=${v:-/}
		refusal
	elif [ "$k" = t ]; then
		into "$@"
		set --
		renames
		[ -n "$why" ] || { enter "$dir" && touch -c -m -d "$v" .; } 2>/dev/null || :
	elif [ "$k" = b ]; then
		base=$v
		continue
	elif [ "$k" = k ]; then
		keep=1
		continue
	elif [ "$k" = r ] || [ "$k" = R ] || [ "$k" = i ] || [ "$k" = v ] ||
		[ "$k" = V ] || [ "$k" = p ]; then
		: # done above
	elif [ -z "$why" ] && { ! [ -d "$dir/$v" ] || [ -L "$dir/$v" ]; } &&
		{ [ -n "$byperl" ] || ! [ -L "$dir/$v" ]; }; then
		# perl's rename(2) replaces a symlink itself (a file renamed
		# over one on the mount); mv into DIR would follow it
		if [ -n "$byperl" ]; then
			printf '%s\0%s\0%s\0%s\0%s\0' "$sd/$g/$v" "$dir" "$v" \
				"$base" "$keep" >&3
		elif based "$dir/$v" || same "$sd/$g/$v" "$dir/$v"; then
			if [ -n "$keep" ] && [ -f "$dir/$v" ] && ! [ -L "$dir/$v" ] &&
				km=$(stat -c %a -- "$dir/$v" 2>/dev/null); then
				chmod "$km" -- "$sd/$g/$v" 2>/dev/null || :
			fi
			set -- "$@" "$sd/$g/$v"
		else
			printf '%s\n' "$sd/$g/$v" >>"$sd/conflicts"
		fi
	fi
	base=
	keep=
done <"$sd/list"
if [ -n "$pend" ]; then
	mkdirs "$@"
else
	into "$@"
fi
renames
exec 3>&-
# what is still staged was not moved
i=-1
g=-1
{
	cat -- "$sd/made"
	while IFS= read -r l; do
		k=${l%"${l#?}"} v=${l#?}
		if [ "$k" = d ]; then
			g=$((g + 1))
			dir=${v:-/}
			refusal
			continue
		fi
		case $k in [mMtcbkrRivVp]) continue ;; esac
		i=$((i + 1))
		s=$sd/$g/$v
		[ -e "$s" ] || [ -L "$s" ] || continue
		if [ -n "$why" ]; then
			echo "x $i $why"
		elif grep -Fxq -- "$s" "$sd/conflicts"; then
			echo "x $i conflict: the file changed on the sandbox since" \
				"the mount's copy was made"
		elif [ -L "$dir/$v" ] || [ -d "$dir/$v" ]; then
			echo "x $i not a regular file"
		else
			echo "x $i cannot rename it into place"
		fi
	done <"$sd/list"
	echo "ok $((i + 1))"
} >"$p.tmp"
if ! mv -f -- "$p.tmp" "$p.done"; then
	cleanup
	exit 1
fi
cleanup
cat -- "$p.done"
