# The guest agent: one process per container generation, started by the
# service through `unshare --mount --pid --fork`, so it is PID 1 of the guest.
# It bind-mounts the generation's directories on /workspace and /tmp, drops to
# the guest uid, then serves file operations (agent_fs) and process control
# (spawn / wait / kill / export) over socketpairs handed to it by the service.
# When the control socket closes it exits, and the kernel kills every guest
# process with it.  Run as: python3 -m mbsvc.agent --ctrl FD ...

import argparse
import ctypes
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import sys
import threading

from . import agent_fs, wire

MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC = 2, 4, 8, 4096, 16384
MNT_DETACH = 2
EXPORT_CAP = 16777216
EXPORT_TIMEOUT = 60.0


class Reaper:
    """Reaps every child (PID 1 also inherits orphans); keeps statuses of spawned ones."""

    def __init__(self):
        self.cond = threading.Condition()
        self.spawned = set()
        self.statuses = {}

    def spawn(self, path, argv, env, fds, setsid):
        actions = [(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds)]
        with self.cond:
            pid = os.posix_spawn(path, argv, env, file_actions=actions, setsid=setsid,
                                 setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM),
                                 setsigmask=())
            self.spawned.add(pid)
            self.cond.notify_all()
        return pid

    def run(self):
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                with self.cond:
                    self.cond.wait(0.5)
                continue
            except InterruptedError:
                continue
            with self.cond:
                if pid in self.spawned:
                    self.spawned.discard(pid)
                    self.statuses[pid] = status
                    self.cond.notify_all()

    def wait(self, pid, timeout=None):
        with self.cond:
            ok = self.cond.wait_for(lambda: pid in self.statuses, timeout)
            return self.statuses.pop(pid) if ok else None

    def live(self):
        with self.cond:
            return list(self.spawned)


class Agent:
    def __init__(self, args):
        self.args = args
        self.reaper = Reaper()
        self.workspace = "/workspace" if args.isolated else args.workspace
        self.tmp = "/tmp" if args.isolated else args.tmp

    # --- degraded mode: translate guest paths onto the generation's dirs ---
    def _to_host(self, path):
        if self.args.isolated or path is None:
            return path
        for guest, host in (("/workspace", self.workspace), ("/tmp", self.tmp)):
            if path == guest or path.startswith(guest + "/"):
                return host + path[len(guest):]
        return path

    def _fs(self, op, req, payload):
        if not self.args.isolated:
            req = dict(req)
            orig = {k: req.get(k) for k in ("path", "destination")}
            for k in orig:
                if k in req:
                    req[k] = self._to_host(req[k])
        res, out = agent_fs.write(req, payload) if op == "write" else agent_fs.OPS[op](req)
        if not self.args.isolated:
            for k, v in orig.items():
                if k in res:
                    res[k] = v
            base = orig["path"] if orig["path"] != "/" else ""
            for e in res.get("entries", []):
                e["path"] = base + "/" + e["name"]
        return res, out

    # --- processes ---
    def spawn(self, req, fds):
        try:
            argv, env, cwd = req["argv"], dict(req["env"]), self._to_host(req.get("cwd"))
            if not self.args.isolated and env.get("HOME"):
                env["HOME"] = self._to_host(env["HOME"])
            if cwd and not os.path.isdir(cwd):
                raise agent_fs.FsError("bad_cwd")
            prog = argv[0]
            if "/" not in prog:
                prog = shutil.which(prog, path=env.get("PATH", os.defpath))
                if prog is None:
                    raise agent_fs.FsError("not_found")
            elif not os.access(prog, os.X_OK):
                raise agent_fs.FsError("not_found")
            path, full = prog, list(argv)
            if req.get("pty"):
                full = ["/usr/bin/setsid", "-c", prog] + full[1:]
            if cwd and cwd != os.getcwd():
                full = ["/usr/bin/env", "-C", cwd, "--"] + ([prog] + full[1:] if full[0] == argv[0] else full)
            if full[0] != argv[0]:
                path = full[0]
            pid = self.reaper.spawn(path, full, env, fds, setsid=not req.get("pty"))
        finally:
            for fd in fds:
                os.close(fd)
        return {"pid": pid}

    def kill(self, req):
        try:
            if req.get("group", True):
                os.killpg(req["pid"], req["sig"])
            else:
                os.kill(req["pid"], req["sig"])
        except OSError:
            raise agent_fs.FsError("no_process")
        return {}

    def export(self):
        out = os.path.join(self.tmp, ".mainbrella-export.%s.tar.gz" % secrets.token_hex(5))
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = self.reaper.spawn("/usr/bin/tar", ["tar", "--one-file-system", "-czf", out, "-C",
                                                     self.workspace, "."],
                                    {"PATH": "/usr/bin:/bin"}, [null, null, null], setsid=True)
        finally:
            os.close(null)
        try:
            status = self.reaper.wait(pid, EXPORT_TIMEOUT)
            if status is None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                self.reaper.wait(pid)
                raise agent_fs.FsError("workspace_export_unavailable")
            if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
                raise agent_fs.FsError("workspace_export_unavailable")
            if os.path.getsize(out) > EXPORT_CAP:
                raise agent_fs.FsError("workspace_export_too_large")
            with open(out, "rb") as f:
                return {}, f.read()
        finally:
            try:
                os.unlink(out)
            except OSError:
                pass

    def dispatch(self, req, payload, fds):
        op = req.get("op")
        if op == "spawn":
            return self.spawn(req, fds), b""
        for fd in fds:
            os.close(fd)
        if op == "wait":
            status = self.reaper.wait(req["pid"], req.get("timeout"))
            return {"status": status}, b""
        if op == "kill":
            return self.kill(req), b""
        if op == "export":
            return self.export()
        if op == "ping":
            return {}, b""
        if op in agent_fs.OPS or op == "write":
            return self._fs(op, req, payload)
        raise agent_fs.FsError("unknown_op")

    def serve(self, sock):
        while True:
            try:
                req, payload, fds = wire.recv(sock)
            except (wire.WireClosed, OSError):
                break
            try:
                res, out = self.dispatch(req, payload, fds)
                res = {"_ok": True, "result": res}
            except agent_fs.FsError as e:
                res, out = {"_ok": False, "error": e.code}, b""
            except Exception as e:  # a bug must not kill the agent
                res, out = {"_ok": False, "error": "internal", "detail": repr(e)}, b""
            try:
                wire.send(sock, res, out)
            except OSError:
                break
        sock.close()

    def shutdown(self):
        for pid in self.reaper.live():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    def main(self, ctrl):
        threading.Thread(target=self.reaper.run, daemon=True).start()
        while True:
            try:
                _req, _payload, fds = wire.recv(ctrl)
            except (wire.WireClosed, OSError):
                self.shutdown()
            for fd in fds:
                conn = socket.socket(fileno=fd)
                threading.Thread(target=self.serve, args=(conn,), daemon=True).start()


def _mount(libc, src, dst, fstype, flags):
    if libc.mount(src.encode(), dst.encode(), fstype and fstype.encode(), flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "mount %s on %s: %s" % (src, dst, os.strerror(err)))


def _detach_fuse_mounts(libc):
    """`unshare --mount` copied every FUSE mount of the host (mbfs mounts of
    other tests among them); a copy would keep that daemon's mount alive after
    the user unmounts it, so detach them all. Best effort."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return
    targets = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype = right.split(" ", 1)[0]
        if fstype.startswith("fuse") and fstype != "fusectl":
            mnt = left.split(" ")[4]
            targets.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mnt))
    for t in sorted(targets, key=len, reverse=True):
        libc.umount2(t.encode(), MNT_DETACH)


def _loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sh14x", b"lo", 0))
        flags = struct.unpack("16sh14x", ifr)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh14x", b"lo", flags | 1))
    finally:
        s.close()


def setup(args):
    """Mount the guest view (isolated mode) and drop to the guest user. Returns the host pid."""
    host_pid = os.getpid()
    if args.isolated:
        host_pid = int(os.readlink("/proc/self"))
        libc = ctypes.CDLL(None, use_errno=True)
        _detach_fuse_mounts(libc)
        _mount(libc, args.workspace, "/workspace", None, MS_BIND | MS_REC)
        _mount(libc, args.tmp, "/tmp", None, MS_BIND | MS_REC)
        try:
            _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as e:
            print("agent: warning: %s" % e, file=sys.stderr)
        if args.no_internet:
            try:
                _loopback_up()
            except OSError as e:
                print("agent: warning: loopback: %s" % e, file=sys.stderr)
    os.chdir(args.workspace if not args.isolated else "/workspace")
    if os.getuid() == 0 and args.uid >= 0:
        os.setgroups([])
        os.setresgid(args.gid, args.gid, args.gid)
        os.setresuid(args.uid, args.uid, args.uid)
    os.umask(0o022)
    return host_pid


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ctrl", type=int, required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--tmp", required=True)
    p.add_argument("--uid", type=int, default=-1)
    p.add_argument("--gid", type=int, default=-1)
    p.add_argument("--isolated", action="store_true")
    p.add_argument("--no-internet", action="store_true")
    args = p.parse_args()
    ctrl = socket.socket(fileno=args.ctrl)
    ctrl.set_inheritable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        host_pid = setup(args)
    except OSError as e:
        wire.send(ctrl, {"ok": False, "error": str(e)})
        sys.exit(1)
    wire.send(ctrl, {"ok": True, "pid": host_pid, "isolated": args.isolated})
    Agent(args).main(ctrl)


if __name__ == "__main__":
    main()
