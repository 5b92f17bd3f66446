# The guest agent, one per container generation. Isolated mode: a child of the
# guest's PID 1 (guestinit), inside all of the guest's namespaces, running as the
# guest user. Degraded mode (no root or no unshare): a plain host process that
# translates /workspace and /tmp onto the generation's directories. Either way it
# serves file operations (agent_fs) and process control (spawn, wait, kill,
# export, zombie count) over socketpairs handed to it by the service. It waits
# only for the processes it spawned, each by pid: it is no subreaper and never
# waits for -1, so orphans go to PID 1 (which does not reap them either).
# Degraded mode entry: python3 -m mbsvc.agent --ctrl FD --workspace DIR --tmp DIR

import argparse
import fcntl
import os
import secrets
import shutil
import signal
import socket
import struct
import sys
import termios
import threading

from . import agent_fs, wire

EXPORT_CAP = 16777216
EXPORT_TIMEOUT = 60.0
_SIGDEF = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)


class Children:
    """The processes this agent spawned, each waited for by a thread of its own."""

    def __init__(self):
        self.cond = threading.Condition()
        self.live = set()
        self.statuses = {}

    def spawn(self, path, argv, env, fds, setsid):
        actions = [(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds)]
        with self.cond:
            pid = os.posix_spawn(path, argv, env, file_actions=actions, setsid=setsid,
                                 setsigdef=_SIGDEF, setsigmask=())
            self.live.add(pid)
        threading.Thread(target=self._reap, args=(pid,), daemon=True).start()
        return pid

    def _reap(self, pid):
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
        with self.cond:
            self.live.discard(pid)
            self.statuses[pid] = status
            self.cond.notify_all()

    def wait(self, pid, timeout=None):
        """The raw wait status of pid, or None on timeout (or if it was never ours)."""
        with self.cond:
            ok = self.cond.wait_for(lambda: pid in self.statuses or pid not in self.live, timeout)
            return self.statuses.pop(pid, None) if ok else None

    def running(self):
        with self.cond:
            return list(self.live)


def _which(prog, path):
    if "/" in prog:
        return prog if os.access(prog, os.X_OK) and not os.path.isdir(prog) else None
    return shutil.which(prog, path=path or os.defpath)


class Agent:
    def __init__(self, isolated, workspace, tmp):
        self.isolated = isolated
        self.children = Children()
        self.workspace = workspace
        self.tmp = tmp

    # --- degraded mode: translate guest paths onto the generation's dirs ---
    def _to_host(self, path):
        if self.isolated or path is None:
            return path
        for guest, host in (("/workspace", self.workspace), ("/tmp", self.tmp)):
            if path == guest or path.startswith(guest + "/"):
                return host + path[len(guest):]
        return path

    def _fs(self, op, req, payload):
        if not self.isolated:
            req = dict(req)
            orig = {k: req.get(k) for k in ("path", "destination")}
            for k in orig:
                if k in req:
                    req[k] = self._to_host(req[k])
        res, out = agent_fs.write(req, payload) if op == "write" else agent_fs.OPS[op](req)
        if not self.isolated:
            for k, v in orig.items():
                if k in res:
                    res[k] = v
            base = orig["path"] if orig["path"] != "/" else ""
            for e in res.get("entries", []):
                e["path"] = base + "/" + e["name"]
        return res, out

    # --- processes ---
    def spawn(self, req, fds):
        """Start argv with fds as stdin/stdout/stderr, or on a new pty of this guest
        whose master goes back to the service. The process leads its own session."""
        master = None
        close = list(fds)
        try:
            argv, env, cwd = req["argv"], dict(req["env"]), self._to_host(req.get("cwd"))
            if not self.isolated and env.get("HOME"):
                env["HOME"] = self._to_host(env["HOME"])
            if cwd and not os.path.isdir(cwd):
                raise agent_fs.FsError("bad_cwd")
            prog = _which(argv[0], env.get("PATH"))
            if prog is None:
                raise agent_fs.FsError("not_found")
            prefix = []
            if cwd and cwd != os.getcwd():
                prefix = ["/usr/bin/env", "-C", cwd, "--"]
            pty = req.get("pty")
            if pty:
                master, slave = os.openpty()
                close.append(slave)
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", pty["rows"], pty["cols"], 0, 0))
                fds = [slave, slave, slave]
                prefix += ["/usr/bin/setsid", "-c"]    # session leader with the pty as controlling terminal
            full = prefix + [prog] + argv[1:] if prefix else list(argv)
            pid = self.children.spawn(full[0] if prefix else prog, full, env, fds, setsid=not pty)
        except BaseException:
            if master is not None:
                os.close(master)
            raise
        finally:
            for fd in close:
                os.close(fd)
        res = {"pid": pid}
        if master is not None:
            res["_fds"] = [master]
        return res

    def kill(self, req):
        try:
            if req.get("group", True):
                os.killpg(req["pid"], req["sig"])
            else:
                os.kill(req["pid"], req["sig"])
        except OSError:
            raise agent_fs.FsError("no_process")
        return {}

    def zombies(self):
        """Processes in state Z in this PID namespace (0 when not isolated),
        and the CPU time the guest's processes have used (cpuMs): every
        process's own and its reaped children's, but not PID 1's or this
        agent's own (the runtime's, outside a container's cgroup on the
        hosted service); the commands this agent reaped count. None when
        not isolated."""
        if not self.isolated:
            return {"zombies": 0, "cpuMs": None}
        count = 0
        ticks = 0
        me = os.getpid()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            rest = data[data.rfind(b")") + 2:].split()
            if rest[:1] == [b"Z"]:
                count += 1
            # fields 14-17 (utime stime cutime cstime) are rest[11:15]
            t = [int(x) for x in rest[11:15]]
            if int(name) == me:
                ticks += t[2] + t[3]
            elif int(name) != 1:
                ticks += sum(t)
        return {"zombies": count, "cpuMs": ticks * 1000 // os.sysconf("SC_CLK_TCK")}

    def export(self):
        out = os.path.join(self.tmp, ".mainbrella-export.%s.tar.gz" % secrets.token_hex(5))
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = self.children.spawn("/usr/bin/tar", ["tar", "--one-file-system", "-czf", out, "-C",
                                                       self.workspace, "."],
                                      {"PATH": "/usr/bin:/bin"}, [null, null, null], setsid=True)
        finally:
            os.close(null)
        try:
            status = self.children.wait(pid, EXPORT_TIMEOUT)
            if status is None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                self.children.wait(pid)
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
            return {"status": self.children.wait(req["pid"], req.get("timeout"))}, b""
        if op == "kill":
            return self.kill(req), b""
        if op == "zombies":
            return self.zombies(), b""
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
            back = []
            try:
                res, out = self.dispatch(req, payload, fds)
                back = res.pop("_fds", [])
                res = {"_ok": True, "result": res}
            except agent_fs.FsError as e:
                res, out = {"_ok": False, "error": e.code}, b""
            except Exception as e:  # a bug must not kill the agent
                res, out = {"_ok": False, "error": "internal", "detail": repr(e)}, b""
            try:
                wire.send(sock, res, out, back)
            except OSError:
                break
            finally:
                for fd in back:
                    os.close(fd)
        sock.close()

    def shutdown(self):
        for pid in self.children.running():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    def main(self, ctrl):
        """Accept connections handed over ctrl until the service closes it."""
        while True:
            try:
                _req, _payload, fds = wire.recv(ctrl)
            except (wire.WireClosed, OSError):
                self.shutdown()
            for fd in fds:
                conn = socket.socket(fileno=fd)
                threading.Thread(target=self.serve, args=(conn,), daemon=True).start()


def serve_isolated(ctrl, host_pid, workdir):
    """Called by guestinit in the forked agent, already the guest user in the guest's root."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctrl.set_inheritable(False)
    os.umask(0o022)
    wire.send(ctrl, {"ok": True, "pid": host_pid, "isolated": True})
    Agent(True, "/workspace", "/tmp").main(ctrl)
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ctrl", type=int, required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--tmp", required=True)
    p.add_argument("--uid", type=int, default=-1)
    p.add_argument("--gid", type=int, default=-1)
    args = p.parse_args()
    ctrl = socket.socket(fileno=args.ctrl)
    ctrl.set_inheritable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        os.chdir(args.workspace)
        if os.getuid() == 0 and args.uid >= 0:
            os.setgroups([])
            os.setresgid(args.gid, args.gid, args.gid)
            os.setresuid(args.uid, args.uid, args.uid)
        os.umask(0o022)
    except OSError as e:
        wire.send(ctrl, {"ok": False, "error": str(e)})
        sys.exit(1)
    wire.send(ctrl, {"ok": True, "pid": os.getpid(), "isolated": False})
    Agent(False, args.workspace, args.tmp).main(ctrl)


if __name__ == "__main__":
    main()
