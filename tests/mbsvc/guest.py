# Host side of a guest: starts it (isolated: `unshare` running guestinit as the
# guest's PID 1, which forks the agent; degraded: the agent as a plain process),
# keeps a pool of socketpair connections to the agent, and offers call() for
# file ops and spawn/wait/kill for processes. stop() closes the lifeline and
# kills PID 1, so the kernel kills every guest process.

import fcntl
import logging
import os
import struct
import shutil
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

from . import config, wire
from .errors import GuestError

log = logging.getLogger("mbsvc.guest")
_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def isolation_available():
    """True when we can create the guest's namespaces (root with unshare)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000


def spread_children(path):
    """Ask ext2/3/4 to give each directory made in path a block group of its
    own (chattr +T), as a hosted container has a disk of its own: a
    container's files are then made away from the thousands the containers
    before it removed, which ext4 without a journal scans at every file it
    makes in their group. Best effort; other file systems have no such
    flag."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        buf = bytearray(8)
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
        flags = struct.unpack("i", bytes(buf[:4]))[0]
        if not flags & FS_TOPDIR_FL:
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags | FS_TOPDIR_FL) + b"\0" * 4)
    except OSError:
        pass
    finally:
        os.close(fd)


class GuestSpec:
    """What a guest looks like inside: its image's working directory, the user
    commands run as, the host uid range guest uids map to, and PID 1's policy."""

    def __init__(self, workdir="/root", guest_uid=0, uid_base=config.UID_BASE, reaping_init=False,
                 size=None):
        self.workdir = workdir
        self.guest_uid = guest_uid
        self.uid_base = uid_base
        self.reaping_init = reaping_init
        self.size = size          # a config.RESOURCES entry to enforce (--enforce-sizes), or None

    @property
    def home(self):
        # Root's home as in every catalog image; another user gets the working directory.
        return "/root" if self.guest_uid == 0 else self.workdir


CGROUP = "/sys/fs/cgroup"
CFS_PERIOD_US = 100000


def cgroup_dirs(name):
    """The cgroup directories to make for a guest called name, as
    [(dir, {file: value-function})]: one of v2 (cpu.max, memory.max) or v1
    (cpu.cfs_quota_us, memory.limit_in_bytes); [] when neither can be used."""
    v2 = os.path.join(CGROUP, "cgroup.controllers")
    if os.path.exists(v2):
        with open(v2) as f:
            have = f.read().split()
        if "cpu" in have and "memory" in have:
            return [(os.path.join(CGROUP, "mbsvc", name), "v2")]
        return []
    if os.path.isdir(os.path.join(CGROUP, "cpu")) and os.path.isdir(os.path.join(CGROUP, "memory")):
        return [(os.path.join(CGROUP, "cpu", "mbsvc", name), "cpu1"),
                (os.path.join(CGROUP, "memory", "mbsvc", name), "mem1")]
    return []


def cgroups_make(name, size):
    """Make the guest's cgroups, limited to size's CPU share and memory;
    returns their cgroup.procs files (the guest's first process joins them
    before it execs), or raises OSError."""
    quota = max(1000, int(size["cpuVcpu"] * CFS_PERIOD_US))
    mem = size["memoryMiB"] * 1048576
    dirs = cgroup_dirs(name)
    if not dirs:
        raise OSError("no cgroup cpu and memory controllers")
    procs = []
    for d, kind in dirs:
        parent = os.path.dirname(d)
        if kind == "v2" and not os.path.isdir(parent):
            os.makedirs(parent)
            with open(os.path.join(CGROUP, "cgroup.subtree_control"), "w") as f:
                f.write("+cpu +memory")
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                f.write("+cpu +memory")
        os.makedirs(d, exist_ok=True)
        settings = {"v2": [("cpu.max", "%d %d" % (quota, CFS_PERIOD_US)), ("memory.max", str(mem)),
                           ("memory.swap.max", "0")],
                    "cpu1": [("cpu.cfs_period_us", str(CFS_PERIOD_US)), ("cpu.cfs_quota_us", str(quota))],
                    "mem1": [("memory.limit_in_bytes", str(mem))]}[kind]
        for fname, value in settings:
            path = os.path.join(d, fname)
            if fname == "memory.swap.max" and not os.path.exists(path):
                continue
            with open(path, "w") as f:
                f.write(value)
        procs.append(os.path.join(d, "cgroup.procs"))
    return procs


def cgroups_remove(name):
    """Remove the guest's cgroups once its last process has left them (the
    kernel ends a PID namespace's processes after its PID 1: give it 5 s)."""
    for d, _ in cgroup_dirs(name):
        for _ in range(100):
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            log.warning("cannot remove the cgroup %s", d)


class Guest:
    """One generation's guest.  Thread-safe."""

    def __init__(self, root, isolated, internet=True, spec=None):
        self.root = root
        self.workspace = os.path.join(root, "workspace")    # degraded mode only
        self.tmp = os.path.join(root, "tmp")                 # degraded mode only
        self.isolated = isolated
        self.internet = internet
        self.spec = spec or GuestSpec()
        self.proc = None
        self.ctrl = None
        self.life = None
        self.agent_pid = None
        self.cgroup = None
        self.idle = []
        self.lock = threading.Lock()
        self.stopped = False

    # --- lifecycle ---
    def _command(self, ctrl_fd, life_fd):
        os.makedirs(os.path.dirname(self.root), exist_ok=True)
        spread_children(os.path.dirname(self.root))
        if not self.isolated:
            uid = gid = -1
            os.makedirs(self.workspace, mode=0o755)
            os.makedirs(self.tmp)
            os.chmod(self.tmp, 0o1777)
            if os.geteuid() == 0:
                uid, gid = config.GUEST_UID, config.GUEST_GID
                os.chown(self.workspace, uid, gid)
                os.chown(self.tmp, uid, gid)
            return [sys.executable, "-m", "mbsvc.agent", "--ctrl", str(ctrl_fd), "--workspace", self.workspace,
                    "--tmp", self.tmp, "--uid", str(uid), "--gid", str(gid)]
        rootfs = os.path.join(self.root, "rootfs")
        os.makedirs(rootfs, mode=0o755)
        flags = ["--mount", "--pid", "--ipc", "--uts", "--fork", "--propagation", "private", "--kill-child"]
        cmd = [sys.executable, "-m", "mbsvc.guestinit", "--ctrl", str(ctrl_fd), "--life", str(life_fd),
               "--rootfs", rootfs, "--workdir", self.spec.workdir, "--uid-base", str(self.spec.uid_base),
               "--guest-uid", str(self.spec.guest_uid)]
        if not self.internet:
            flags.append("--net")
            cmd.append("--no-internet")
        if self.spec.reaping_init:
            cmd.append("--reaping-init")
        argv = ["unshare"] + flags + ["--"] + cmd
        if self.spec.size is not None:
            # the first process joins the cgroups before it execs: every
            # guest process is created inside them
            self.cgroup = "g%d-%s" % (os.getpid(), secrets.token_hex(4))
            procs = cgroups_make(self.cgroup, self.spec.size)
            argv = ["/bin/sh", "-c", 'for f in %s; do echo $$ >"$f" || exit 1; done; exec "$@"'
                    % " ".join(shlex.quote(p) for p in procs), "mbsvc-guest"] + argv
        return argv

    def start(self, timeout):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        life_r, self.life = os.pipe()          # PID 1 exits when this write end closes
        try:
            cmd = self._command(theirs.fileno(), life_r)
            env = {"PATH": config.GUEST_PATH, "PYTHONPATH": _PKG_PARENT, "PYTHONDONTWRITEBYTECODE": "1"}
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         pass_fds=(theirs.fileno(), life_r), env=env, cwd="/",
                                         start_new_session=True)
        finally:
            theirs.close()
            os.close(life_r)
        self.ctrl = mine
        mine.settimeout(timeout)
        try:
            hello, _, _ = wire.recv(mine)
        except (OSError, wire.WireClosed) as e:
            self.stop()
            raise GuestError("agent did not start: %s" % e)
        mine.settimeout(None)
        if not hello.get("ok"):
            self.stop()
            raise GuestError("agent failed: %s" % hello.get("error"))
        self.agent_pid = hello["pid"]

    def stop(self):
        """Kill every guest process and the agent.  Idempotent."""
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
            idle, self.idle = self.idle, []
        if self.life is not None:
            os.close(self.life)
        if self.agent_pid:
            try:
                os.kill(self.agent_pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.kill()
            except OSError:
                pass
        for s in idle + ([self.ctrl] if self.ctrl else []):
            try:
                s.close()
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                log.warning("guest agent %s did not exit", self.proc.pid)
        if self.cgroup:
            cgroups_remove(self.cgroup)

    # --- connections ---
    def _connect(self):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                if self.stopped:
                    raise GuestError("guest stopped")
                wire.send(self.ctrl, {"op": "conn"}, fds=[theirs.fileno()])
        except OSError as e:
            mine.close()
            raise GuestError("agent gone: %s" % e)
        finally:
            theirs.close()
        return mine

    def call(self, header, payload=b"", fds=(), timeout=None, received=None):
        """Send one request and return (response, payload); fds sent back are appended
        to received (or closed).  GuestError on transport failure."""
        with self.lock:
            conn = self.idle.pop() if self.idle else None
        if conn is None:
            conn = self._connect()
        conn.settimeout(timeout)
        try:
            wire.send(conn, header, payload, fds)
            res, out, back = wire.recv(conn)
        except (OSError, wire.WireClosed) as e:
            conn.close()
            raise GuestError("agent call failed: %s" % e)
        if received is not None:
            received.extend(back)
        else:
            for fd in back:
                os.close(fd)
        with self.lock:
            if self.stopped:
                conn.close()
            else:
                self.idle.append(conn)
        return res, out

    # --- processes ---
    def spawn(self, argv, env, fds, cwd=None):
        """Start a process with fds as its stdin/stdout/stderr; returns its guest pid or raises GuestError.
        The process leads its own session and process group."""
        res, _ = self.call({"op": "spawn", "argv": argv, "env": env, "cwd": cwd}, fds=fds, timeout=30)
        if not res.get("_ok"):
            raise GuestError(res.get("error", "spawn failed"))
        return res["result"]["pid"]

    def spawn_pty(self, argv, env, cwd, cols, rows):
        """Start a process on a new pty of the guest; returns (pid, master fd)."""
        back = []
        res, _ = self.call({"op": "spawn", "argv": argv, "env": env, "cwd": cwd,
                            "pty": {"cols": cols, "rows": rows}}, timeout=30, received=back)
        if not res.get("_ok") or len(back) != 1:
            for fd in back:
                os.close(fd)
            raise GuestError(res.get("error", "spawn failed"))
        return res["result"]["pid"], back[0]

    def wait(self, pid, timeout=None):
        """Block until pid exits (or timeout seconds); returns the raw wait status.
        GuestError if the guest dies or the time runs out."""
        res, _ = self.call({"op": "wait", "pid": pid}, timeout=timeout)
        if not res.get("_ok") or res["result"]["status"] is None:
            raise GuestError(res.get("error", "wait failed"))
        return res["result"]["status"]

    def kill(self, pid, sig, group=True):
        try:
            res, _ = self.call({"op": "kill", "pid": pid, "sig": int(sig), "group": group}, timeout=10)
        except GuestError:
            return False
        return bool(res.get("_ok"))

    def zombies(self):
        """Zombie processes in the guest's PID namespace, or None if the agent does not answer."""
        try:
            res, _ = self.call({"op": "zombies"}, timeout=10)
        except GuestError:
            return None
        return res["result"]["zombies"] if res.get("_ok") else None

    def usage(self):
        """(zombies, guest CPU ms or None) as the agent counts them, or None
        if the agent does not answer."""
        try:
            res, _ = self.call({"op": "zombies"}, timeout=10)
        except GuestError:
            return None
        if not res.get("_ok"):
            return None
        return res["result"]["zombies"], res["result"].get("cpuMs")
