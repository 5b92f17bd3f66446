# Host side of a guest agent: starts it in fresh mount+PID namespaces
# (unshare), keeps a pool of socketpair connections to it, and offers
# call() for file ops and spawn/wait/kill for processes.  stop() kills the
# agent, which is PID 1 of the guest, so the kernel kills every guest process.

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading

from . import config, wire
from .errors import GuestError

log = logging.getLogger("mbsvc.guest")
_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def isolation_available():
    """True when we can create mount+PID namespaces (root with unshare)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None


class Guest:
    """One generation's guest.  Thread-safe."""

    def __init__(self, root, isolated, internet=True):
        self.root = root
        self.workspace = os.path.join(root, "workspace")
        self.tmp = os.path.join(root, "tmp")
        self.isolated = isolated
        self.internet = internet
        self.proc = None
        self.ctrl = None
        self.agent_pid = None
        self.idle = []
        self.lock = threading.Lock()
        self.stopped = False

    # --- lifecycle ---
    def start(self, timeout):
        os.makedirs(self.workspace, mode=0o755)
        os.makedirs(self.tmp)
        os.chmod(self.tmp, 0o1777)
        uid = gid = -1
        if os.geteuid() == 0:
            uid, gid = config.GUEST_UID, config.GUEST_GID
            os.chown(self.workspace, uid, gid)
            os.chown(self.tmp, uid, gid)
            os.chmod(self.workspace, 0o755)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [sys.executable, "-m", "mbsvc.agent", "--ctrl", str(theirs.fileno()),
               "--workspace", self.workspace, "--tmp", self.tmp, "--uid", str(uid), "--gid", str(gid)]
        if self.isolated:
            os.makedirs("/workspace", exist_ok=True)
            flags = ["--mount", "--pid", "--fork", "--propagation", "private", "--kill-child"]
            if not self.internet:
                flags.append("--net")
                cmd.append("--no-internet")
            cmd = ["unshare"] + flags + ["--"] + cmd + ["--isolated"]
        env = {"PATH": config.GUEST_PATH, "PYTHONPATH": _PKG_PARENT, "PYTHONDONTWRITEBYTECODE": "1"}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                                     env=env, cwd="/", start_new_session=True)
        theirs.close()
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

    def call(self, header, payload=b"", fds=(), timeout=None):
        """Send one request and return (response, payload).  GuestError on transport failure."""
        with self.lock:
            conn = self.idle.pop() if self.idle else None
        if conn is None:
            conn = self._connect()
        conn.settimeout(timeout)
        try:
            wire.send(conn, header, payload, fds)
            res, out, _ = wire.recv(conn)
        except (OSError, wire.WireClosed) as e:
            conn.close()
            raise GuestError("agent call failed: %s" % e)
        with self.lock:
            if self.stopped:
                conn.close()
            else:
                self.idle.append(conn)
        return res, out

    # --- processes ---
    def spawn(self, argv, env, fds, cwd=None, pty=False):
        """Start a process with fds as its stdin/stdout/stderr; returns its guest pid or raises GuestError."""
        res, _ = self.call({"op": "spawn", "argv": argv, "env": env, "cwd": cwd, "pty": pty}, fds=fds,
                           timeout=30)
        if not res.get("_ok"):
            raise GuestError(res.get("error", "spawn failed"))
        return res["result"]["pid"]

    def wait(self, pid):
        """Block until pid exits; returns the raw wait status.  GuestError if the guest dies."""
        res, _ = self.call({"op": "wait", "pid": pid})
        if not res.get("_ok"):
            raise GuestError(res.get("error", "wait failed"))
        return res["result"]["status"]

    def kill(self, pid, sig, group=True):
        try:
            res, _ = self.call({"op": "kill", "pid": pid, "sig": int(sig), "group": group}, timeout=10)
        except GuestError:
            return False
        return bool(res.get("_ok"))
