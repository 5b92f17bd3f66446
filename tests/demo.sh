#!/usr/bin/env bash
# The newcomer's demo: local service -> container -> mount -> edit files with
# ordinary tools -> run with mbexec -> read the result through the mount.
# Cleans up (unmount, stop the container, stop the service) on every exit path.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
bin=${MB_BIN_DIR:-$top}
mnt=$top/demo-mnt
state=$top/build/demo-state
svc_pid=
ident=

step() { printf '\n==> %s\n' "$*"; }

cleanup() {
	set +e
	cd "$top"
	if mountpoint -q "$mnt" 2>/dev/null; then
		step "unmounting $mnt (pending writes are uploaded first)"
		fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
	fi
	if [ -n "$ident" ] && [ -n "$svc_pid" ]; then
		step "stopping the container ($ident)"
		/usr/bin/python3 tests/demo_api.py delete "$ident" >/dev/null
	fi
	if [ -n "$svc_pid" ]; then
		step "stopping the local service"
		kill "$svc_pid" 2>/dev/null
		wait "$svc_pid" 2>/dev/null
	fi
	rmdir "$mnt" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

step "starting the local Mainbrella service (tests/localservice.py) on a free loopback port"
rm -rf "$state"; mkdir -p "$state"
# made before the service starts: its redirect opens the file in the
# background, and a first look that comes sooner must find it (set -e)
: >"$state/service.out"
# The key goes through the environment, never the command line.
MAINBRELLA_API_KEY=mb_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export MAINBRELLA_API_KEY
/usr/bin/python3 tests/localservice.py --listen 127.0.0.1:0 --state "$state/svc" \
	>"$state/service.out" 2>"$state/service.log" &
svc_pid=$!
url=
for _ in $(seq 1 300); do
	url=$(sed -n 's/^listening //p' "$state/service.out")
	[ -n "$url" ] && break
	kill -0 "$svc_pid" 2>/dev/null || { cat "$state/service.log" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "the local service did not start; see $state/service.log" >&2; exit 1; }
export MAINBRELLA_API_URL=$url
echo "service at $MAINBRELLA_API_URL (log: $state/service.log)"

step "creating a container and mounting its /workspace on ./demo-mnt (mbfs --create)"
mkdir -p "$mnt"
"$bin/fuse/mbfs" --create "$mnt"
ident=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["id"]+"@"+c["createdAt"])' "$mnt/.mainbrella")
echo "mounted container $ident; the control file says:"
cat "$mnt/.mainbrella"

cd "$mnt"
step "writing input.json with an ordinary shell redirect, through the mount"
printf '[12, 17, 13]\n' > input.json

if command -v node >/dev/null 2>&1 && "$bin/shim/mbexec" sh -c 'command -v node' >/dev/null 2>&1; then
	step "writing report.cjs (a Node script) with cat, through the mount"
	cat > report.cjs <<'JS'
const fs = require("fs");
const values = JSON.parse(fs.readFileSync("input.json", "utf8"));
const total = values.reduce((a, b) => a + b, 0);
fs.writeFileSync("report.txt", `total=${total}\n`);
console.log(`report.cjs: summed ${values.length} values on ${require("os").hostname()}`);
JS
	run=(node report.cjs)
else
	step "writing report.sh (node is missing on the sandbox) with cat, through the mount"
	cat > report.sh <<'SH'
total=0
for v in $(tr -d '[],' < input.json); do total=$((total + v)); done
echo "total=$total" > report.txt
echo "report.sh: summed the values"
SH
	run=(sh report.sh)
fi
ls -l

step "running it in the sandbox with mbexec: ${run[*]}"
"$bin/shim/mbexec" "${run[@]}"

step "reading the report back through the mount"
cat report.txt
