# bash completion for mbfs and mbexec: one file, installed twice, as
# .../bash-completion/completions/mbfs and .../mbexec (bash-completion
# loads the file named after the command; either defines both).
#
# mbfs: its options (as in `mbfs --help`), the -o mount options,
# --catalog/--size values, --profile names from the configuration file,
# the CONTAINER argument from `mbfs --list` (when this mbfs has it) and
# mountpoints (directories).
# mbexec: its options (as in `mbexec --help`) and their values (--mode,
# --profile, -C/--mount directories, --key-file, -e names), then the
# command and its arguments.
# Needs only bash, not the bash-completion package.

# The profiles of $XDG_CONFIG_HOME/mainbrella/config (~/.config/...).
_mainbrella_profiles()
{
	local f
	if [[ $XDG_CONFIG_HOME == /* ]]; then
		f=$XDG_CONFIG_HOME/mainbrella/config
	else
		f=$HOME/.config/mainbrella/config
	fi
	[[ -r $f ]] || return 0
	sed -n 's/^[[:space:]]*\[[[:space:]]*\([A-Za-z0-9_.-]*\)[[:space:]]*\][[:space:]]*$/\1/p' "$f"
}

# The words up to the cursor, split on blanks only (COMP_WORDS also splits
# at '=' and ':', which CONTAINER@GEN:DIR and --size=VALUE hold); sets
# _mb_words (the last one is the word being completed).
_mainbrella_words()
{
	local line
	if [[ -n $COMP_LINE ]]; then
		line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
		local IFS=$' \t\n'
		set -f
		# shellcheck disable=SC2206
		_mb_words=($line)
		set +f
		[[ $line == *[[:space:]] || -z $line ]] && _mb_words+=("")
	else
		_mb_words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
	fi
}

# COMPREPLY=(candidates matching cur), without the part of cur that bash
# does not replace (up to its last '=' or ':', when those break words).
_mainbrella_reply()
{
	local cur=$1 keep="" c
	shift
	if [[ $COMP_WORDBREAKS == *:* && $cur == *:* ]]; then
		keep=${cur%"${cur##*:}"}
	fi
	if [[ $COMP_WORDBREAKS == *=* && ${cur##*:} == *=* ]]; then
		keep=${cur%"${cur##*=}"}
	fi
	COMPREPLY=()
	for c in "$@"; do
		[[ $c == "$cur"* ]] && COMPREPLY+=("${c#"$keep"}")
	done
}

_mainbrella_dirs()
{
	local IFS=$'\n'
	# shellcheck disable=SC2207
	COMPREPLY=($(compgen -d -- "$1"))
	compopt -o filenames 2>/dev/null
	return 0
}

_mainbrella_files()
{
	local IFS=$'\n'
	# shellcheck disable=SC2207
	COMPREPLY=($(compgen -f -- "$1"))
	compopt -o filenames 2>/dev/null
	return 0
}

# Containers from `mbfs --list` (columns ID GENERATION ...): each ID and
# ID@GENERATION, for mbfs's first argument and for --stop.
_mbfs_containers()
{
	local prog=$1
	timeout 5 "$prog" --list 2>/dev/null |
		awk '$1 ~ /^(small|c[0-9]+)$/ { print $1; print $1 "@" $2 }'
}

_mbfs()
{
	local _mb_words cur prev prog=${COMP_WORDS[0]:-mbfs}
	_mainbrella_words
	cur=${_mb_words[${#_mb_words[@]}-1]}
	prev=${_mb_words[${#_mb_words[@]}-2]}
	local opts="-f -d -v --verbose -s -o --create --catalog --size --profile --status --wait --json -u --unmount --timeout --list --stop --force -h --help -V --version"
	local mopts="ro attr_timeout= dir_timeout= negative_timeout= op_timeout= keepalive= cache_dir= log_file= key_file= api_url= profile= uid= gid= sync_close bulk_read= allow_other allow_root auto_unmount max_threads= clone_fd umask= direct_io"

	case $cur in
	--size=*) _mainbrella_reply "$cur" --size={lite,small,medium,large,xl}; return 0 ;;
	--catalog=*) _mainbrella_reply "$cur" --catalog={node,python,rust,go,devops}; return 0 ;;
	--profile=*)
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mainbrella_profiles | sed 's/^/--profile=/'); return 0 ;;
	esac
	case $prev in
	--size) _mainbrella_reply "$cur" lite small medium large xl; return 0 ;;
	--catalog) _mainbrella_reply "$cur" node python rust go devops; return 0 ;;
	--profile)
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mainbrella_profiles); return 0 ;;
	--stop)
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mbfs_containers "$prog" | grep @); return 0 ;;
	-o)
		# one of a comma-separated list: complete the last item
		local head="" item=$cur
		[[ $cur == *,* ]] && head=${cur%,*}, && item=${cur##*,}
		case $item in
		profile=*)
			# shellcheck disable=SC2046
			_mainbrella_reply "$cur" $(_mainbrella_profiles | sed "s/^/${head}profile=/") ;;
		key_file=*|cache_dir=*|log_file=*)
			local IFS=$'\n' f
			local -a c=()
			for f in $(compgen -f -- "${item#*=}"); do c+=("$head${item%%=*}=$f"); done
			_mainbrella_reply "$cur" "${c[@]}" ;;
		*)
			local m
			local -a c=()
			for m in $mopts; do c+=("$head$m"); done
			_mainbrella_reply "$cur" "${c[@]}" ;;
		esac
		[[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
		return 0 ;;
	esac
	if [[ $cur == -* ]]; then
		# shellcheck disable=SC2086
		_mainbrella_reply "$cur" $opts
		return 0
	fi
	# which argument: skip the options and their values
	local i w n=0 mp_only=0
	for ((i = 1; i < ${#_mb_words[@]} - 1; i++)); do
		w=${_mb_words[i]}
		case $w in
		-o|--size|--catalog|--profile|--stop|--timeout) ((i++)) ;;
		--create|--status|-u|--unmount) mp_only=1 ;;
		-*) ;;
		*) ((n++)) ;;
		esac
	done
	if ((mp_only || n >= 1)); then
		_mainbrella_dirs "$cur"
	else
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mbfs_containers "$prog")
	fi
	return 0
}

_mbexec()
{
	local _mb_words cur prev
	_mainbrella_words
	cur=${_mb_words[${#_mb_words[@]}-1]}
	prev=${_mb_words[${#_mb_words[@]}-2]}
	local opts="-C --cwd --mount --sh -e --env -i --interactive -n --no-stdin -t --tty -T --no-tty --timeout --mode --json --no-wait-output --key-file --profile --attach -v --verbose -h --help -V --version"
	local i w

	# options end at the first word that is not one: the command
	for ((i = 1; i < ${#_mb_words[@]} - 1; i++)); do
		w=${_mb_words[i]}
		case $w in
		--) ((i++)); break ;;
		-C|--cwd|--mount|--sh|-e|--env|--timeout|--mode|--key-file|--profile|--attach) ((i++)) ;;
		-*) ;;
		*) break ;;
		esac
	done
	if ((i < ${#_mb_words[@]} - 1)) || [[ $prev == -- ]]; then
		if [[ $prev == -- ]] || ((i == ${#_mb_words[@]} - 1)); then
			local IFS=$'\n'
			# shellcheck disable=SC2207
			COMPREPLY=($(compgen -c -- "$cur"))
		elif declare -F _command_offset >/dev/null &&
		     ((${#COMP_WORDS[@]} == ${#_mb_words[@]})); then
			_command_offset "$i"
		else
			_mainbrella_files "$cur"
		fi
		return 0
	fi
	case $cur in
	--mode=*) _mainbrella_reply "$cur" --mode={auto,exec,managed}; return 0 ;;
	--profile=*)
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mainbrella_profiles | sed 's/^/--profile=/'); return 0 ;;
	esac
	case $prev in
	--mode) _mainbrella_reply "$cur" auto exec managed; return 0 ;;
	--profile)
		# shellcheck disable=SC2046
		_mainbrella_reply "$cur" $(_mainbrella_profiles); return 0 ;;
	-C|--cwd|--mount) _mainbrella_dirs "$cur"; return 0 ;;
	--key-file) _mainbrella_files "$cur"; return 0 ;;
	-e|--env)
		local IFS=$'\n'
		# shellcheck disable=SC2207
		COMPREPLY=($(compgen -e -- "$cur"))
		return 0 ;;
	--timeout) _mainbrella_reply "$cur" 30 500ms 2m 1h; return 0 ;;
	--sh|--attach) COMPREPLY=(); return 0 ;;
	esac
	if [[ $cur == -* ]]; then
		# shellcheck disable=SC2086
		_mainbrella_reply "$cur" $opts
		return 0
	fi
	local IFS=$'\n'
	# shellcheck disable=SC2207
	COMPREPLY=($(compgen -c -- "$cur"))
	return 0
}

complete -F _mbfs mbfs
complete -F _mbexec mbexec
