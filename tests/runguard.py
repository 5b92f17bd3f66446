"""runguard.py: what a test run made, and the one place that ends it.

A run of the suite makes local services (and their guests), mbfs daemons,
mounts and cache directories, and some tests freeze a service or a daemon
(SIGSTOP) on purpose. If pytest dies at such a moment (a time limit, a
Ctrl-C, kill -9 of it or of one xdist worker), a stopped daemon left under
a mount hangs every later `ls`, `df` or `sync` that touches it. So:

- The run has one directory, $MB_TEST_RUN (under /var/tmp), and every
  pytest process that runs tests has its own scope in it, $MB_TEST_SCOPE
  (main/ or gwN/). Everything a test makes lives in its scope (mountpoints,
  service state, cache dirs: mbtest.tmp_base()), and every process it
  starts inherits MB_TEST_SCOPE in its environment. "What the scope made"
  is read off /proc: the processes whose environment, command line or
  working directory names the scope, with all their descendants (a
  guest's processes), plus the pids registered by freeze(); the mounts
  whose mountpoint is in the scope.
- clean(scope) ends all of it: SIGCONT, abort the FUSE connections
  (fusectl), lazy unmount, SIGKILL, remove the guests' cgroups, then the
  directory.
- A watchdog (`python3 runguard.py watch PID SCOPE`, in a session of its
  own) follows each pytest process through a pipe: when the pipe ends
  without a "bye" (the process died), it cleans that scope, and also ends
  the process's descendants it saw last.
- conftest.py calls clean at the end of the session, at SIGTERM, and
  fails the run when the session's end finds anything still there.

Only the standard library, and nothing here touches a mount's files: a
stopped daemon cannot hang the cleaner.
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import time

RUN_ENV = "MB_TEST_RUN"
SCOPE_ENV = "MB_TEST_SCOPE"
FUSECTL = "/sys/fs/fuse/connections"
CGROUP_MBSVC = ("/sys/fs/cgroup/mbsvc", "/sys/fs/cgroup/cpu/mbsvc", "/sys/fs/cgroup/memory/mbsvc")
FREEZE_DIR = ".frozen"          # in a scope: one file per registered pid


# --- /proc ---------------------------------------------------------------

def _stat(pid):
    """(state, ppid, starttime) of pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(b")") + 2:].split()
    return rest[0].decode(), int(rest[1]), int(rest[19])


def stopped_or_gone(pid):
    """Whether pid has ended or is stopped (SIGSTOP): it will not answer."""
    st = _stat(pid)
    return not st or st[0] in "Tt"


def _table():
    """{pid: (state, ppid, starttime)} of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                out[int(name)] = st
    return out


def _read(pid, what):
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            return f.read()
    except OSError:
        return b""


def cmdline(pid):
    return _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def _names_scope(pid, scope):
    """Whether pid was made for scope: its environment, command line or
    working directory names it (readlink of cwd reads no mount)."""
    s = scope.encode()
    env = _read(pid, "environ")
    for var in env.split(b"\0"):
        if var.startswith(SCOPE_ENV.encode() + b"=") and (var[len(SCOPE_ENV) + 1:] + b"/").startswith(s + b"/"):
            return True
    if s + b"/" in _read(pid, "cmdline").replace(b"\0", b" ") + b"/":
        return True
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return False
    return (cwd + "/").startswith(scope + "/")


def _is_watchdog(pid):
    return b"runguard.py\0watch\0" in _read(pid, "cmdline")


def _descendants(roots, table):
    kids = {}
    for pid, (_, ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(kids.get(p, ()))
    return seen


def _registered(scope):
    d = os.path.join(scope, FREEZE_DIR)
    out = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        pid, _, start = n.partition("-")
        if pid.isdigit() and start.isdigit():
            out[int(pid)] = int(start)
    return out


def processes(scope, extra=None, exclude=()):
    """{pid: starttime} of the processes scope made (see the file's
    comment), with extra {pid: starttime} and their descendants; never
    this process, its ancestors or a watchdog."""
    table = _table()
    mine = set()
    p = os.getpid()
    while p > 1 and p in table:
        mine.add(p)
        p = table[p][1]
    roots = [pid for pid in table if pid not in mine and _names_scope(pid, scope)]
    for pid, start in list(_registered(scope).items()) + list((extra or {}).items()):
        if pid in table and table[pid][2] == start:
            roots.append(pid)
    found = {}
    for pid in _descendants(roots, table):
        if pid in table and pid not in mine and pid not in exclude and not _is_watchdog(pid):
            found[pid] = table[pid][2]
    return found


def descendants_of(pid):
    """{pid: starttime} of pid's descendants (not pid), watchdogs aside."""
    table = _table()
    return {p: table[p][2] for p in _descendants([pid], table)
            if p != pid and p in table and not _is_watchdog(p)}


# --- mounts --------------------------------------------------------------

def _unescape(field):
    return field.encode().decode("unicode_escape")


def mounts(scope):
    """[(mountpoint, major:minor, fstype)] of the mounts in scope, deepest
    first; from mountinfo, so a stopped daemon cannot hang it."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mp = _unescape(fields[4])
        fstype = line.split(" - ", 1)[1].split()[0]
        if (mp + "/").startswith(scope + "/") and mp != scope:
            out.append((mp, fields[2], fstype))
    out.sort(key=lambda m: -len(m[0]))
    return out


def _abort(dev):
    """Abort the FUSE connection of device major:minor: every request
    waiting on it returns ENOTCONN, whatever its daemon does."""
    if not os.path.isdir(FUSECTL):
        return
    if not os.listdir(FUSECTL):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL], capture_output=True, timeout=10)
    major, minor = (int(x) for x in dev.split(":"))
    try:
        with open(os.path.join(FUSECTL, str(major << 20 | minor), "abort"), "w") as f:
            f.write("1")
    except OSError:
        pass


def _detach(mp):
    for cmd in (["umount", "-l", mp], ["fusermount3", "-uz", mp]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0:
                return
        except (OSError, subprocess.TimeoutExpired):
            pass


# --- the cleaner ---------------------------------------------------------

def _signal(pids, sig):
    for pid, start in pids.items():
        st = _stat(pid)
        if st and st[2] == start:
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def describe(scope, extra=None):
    """Lines naming what scope still holds: its mounts and processes."""
    lines = ["mount %s (%s)" % (mp, fstype) for mp, _, fstype in mounts(scope)]
    for pid in sorted(processes(scope, extra)):
        st = _stat(pid)
        if st:
            lines.append("process %d [%s%s] %s" % (pid, st[0], ", stopped" if st[0] in "Tt" else "",
                                                    cmdline(pid)[:200]))
    return lines


def clean(scope, extra=None, remove=True):
    """End everything scope made (and extra {pid: starttime} with its
    descendants); returns describe()'s lines of what was there. Order
    matters: a stopped process is continued before it is killed (a
    stopped process killed dies only once continued, and holds its mount
    meanwhile); a mount's connection is aborted before it is detached, so
    nothing blocked on it waits any longer."""
    found = describe(scope, extra)
    procs = processes(scope, extra)
    _signal(procs, signal.SIGCONT)
    for mp, dev, fstype in mounts(scope):
        if fstype.startswith("fuse"):
            _abort(dev)
        _detach(mp)
    _signal(procs, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        procs = processes(scope, extra)
        if not procs:
            break
        _signal(procs, signal.SIGCONT)
        _signal(procs, signal.SIGKILL)
        time.sleep(0.1)
    _remove_cgroups(found)
    if remove and not mounts(scope):
        shutil.rmtree(scope, ignore_errors=True)
    return found


def _remove_cgroups(found):
    """The local service names a guest's cgroup g<service pid>-...; a
    service killed here left them (empty now)."""
    pids = {line.split()[1] for line in found if line.startswith("process ")}
    for top in CGROUP_MBSVC:
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for n in names:
            if n.startswith("g") and n[1:].split("-")[0] in pids:
                try:
                    os.rmdir(os.path.join(top, n))
                except OSError:
                    pass


def register(scope, pid):
    """Name pid as the scope's (a test about to freeze it): clean()
    continues and ends it even when it names the scope nowhere."""
    st = _stat(pid)
    if not st:
        return
    d = os.path.join(scope, FREEZE_DIR)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "%d-%d" % (pid, st[2])), "w").close()


# --- the watchdog --------------------------------------------------------

_WATCHDOGS = []     # kept, so that no ResourceWarning says they still run


def start_watchdog(scope):
    """A watchdog for this process and scope; returns the pipe's write end
    (write b"bye\\n" to it when this process has cleaned up itself). The
    watchdog is in a session of its own, so Ctrl-C or a timeout's signal
    to the process group does not end it before it has cleaned up."""
    r, w = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != SCOPE_ENV}
    _WATCHDOGS.append(subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "watch", str(os.getpid()), scope],
        stdin=r, stdout=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True))
    os.close(r)
    return w


def watch(pid, scope):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    seen, said = {}, b""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if ready:
            data = os.read(0, 64)
            said += data
            if not data or b"bye" in said:
                break
        if _stat(pid) is None:
            break
        seen.update(descendants_of(pid))
        seen = {p: s for p, s in seen.items() if (_stat(p) or (0, 0, None))[2] == s}
    if b"bye" in said:
        return 0
    found = clean(scope, extra=seen)
    if found:
        sys.stderr.write("runguard: pytest process %d ended without cleaning up; ended in %s:\n  %s\n"
                         % (pid, scope, "\n  ".join(found)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "watch":
        sys.exit(watch(int(sys.argv[2]), sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "clean":
        print("\n".join(clean(os.path.abspath(sys.argv[2]))) or "nothing left")
        sys.exit(0)
    sys.stderr.write("usage: runguard.py watch PID SCOPE | clean SCOPE\n")
    sys.exit(2)
