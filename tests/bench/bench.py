#!/usr/bin/python3
"""Benchmarks: mbfs on the local service against sshfs over loopback.

Runs the same workloads through mbfs (local service, tests/localservice.py)
and, when sshfs and sshd are available, through sshfs on a private sshd
(its own host key, config and port; the system sshd is never touched), at
0 ms and at 20 ms of added round-trip latency: the service's --latency-ms
for mbfs, tests/bench/delayproxy.py in front of sshd for sshfs. Prints a
table of medians, ratios mbfs/sshfs, the API requests each mbfs run made,
and mbfs throughput against the raw limit of the API (parallel 1 MiB GETs and
PUTs by a plain keep-alive HTTP client). Writes the same as markdown to
build/bench-results.md.

Figures are printed, never asserted. Every mount, sshd, proxy and service it
starts is stopped on every exit path. Traffic goes only to 127.0.0.1.

Standard library only. Run as root (sshd for root login, apt-get).
"""
import argparse
import contextlib
import http.client
import os
import queue
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
import mbtest  # noqa: E402

PYTHON = "/usr/bin/python3"
MIB = 1024 * 1024
SSH_PACKAGES = ["sshfs", "openssh-server", "openssh-client"]
NEEDLE = "needle-7f3a"


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- cleanup

class Cleanup:
    """A stack of undo actions run in reverse order, each at most once."""

    def __init__(self):
        self.actions = []
        self.lock = threading.Lock()

    def push(self, fn, *args):
        with self.lock:
            self.actions.append((fn, args))
        return (fn, args)

    def run(self, item):
        """Run one action now (if still pending) and forget it."""
        with self.lock:
            if item not in self.actions:
                return
            self.actions.remove(item)
        fn, args = item
        try:
            fn(*args)
        except Exception as e:  # cleanup must go on
            log("cleanup %s: %s" % (getattr(fn, "__name__", fn), e))

    def run_all(self):
        while True:
            with self.lock:
                if not self.actions:
                    return
                item = self.actions[-1]
            self.run(item)


CLEANUP = Cleanup()


def fuse_mounts_under(prefix):
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                mnt = parts[4].encode().decode("unicode_escape")
                fstype = line.split(" - ", 1)[1].split()[0]
                if fstype.startswith("fuse") and mnt.startswith(prefix):
                    out.append(mnt)
    except OSError:
        pass
    return out


def force_unmount_under(prefix):
    for mnt in fuse_mounts_under(prefix):
        log("forcing unmount of leftover %s" % mnt)
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)


def remove_tmp(tmp, keep):
    left = fuse_mounts_under(tmp + "/")
    if left:
        log("not removing %s: still mounted: %s" % (tmp, ", ".join(left)))
    elif keep:
        log("scratch directory kept: %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def stop_process(proc, timeout=10):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def threads_of(pid):
    """Where each thread of a process waits: for a daemon slow to exit."""
    out = []
    try:
        for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
            try:
                with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                    wchan = f.read().strip()
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            out.append("%s:%s:%s" % (tid, state, wchan))
    except OSError:
        pass
    return " ".join(out)


def fuse_conn_id(mnt):
    """The fusectl connection number of a mounted FUSE filesystem."""
    dev = os.stat(mnt).st_dev
    return (os.major(dev) << 20) | os.minor(dev)


def abort_fuse_conn(conn):
    """Abort a FUSE connection through fusectl (mounting it if needed)."""
    top = "/sys/fs/fuse/connections"
    mounted = False
    if not os.path.ismount(top):
        mounted = subprocess.run(["mount", "-t", "fusectl", "fusectl", top], capture_output=True).returncode == 0
    try:
        with open("%s/%d/abort" % (top, conn), "w") as f:
            f.write("1")
        return True
    except OSError:
        return False
    finally:
        if mounted:
            subprocess.run(["umount", top], capture_output=True)


def unmount_daemon(name, mnt, proc, conn, grace=1):
    """Unmount a FUSE mount and see its daemon exit. Returns the exit status.

    A copy of the mount in another mount namespace keeps the filesystem alive
    after `fusermount3 -u`, and the daemon then never hears of the unmount
    (tests/localservice.py guests are made with `unshare --mount` and copy
    every mount that exists when they start). After `grace` seconds the
    connection is aborted through fusectl: the daemon sees the same end of
    its session as at a normal unmount."""
    t0 = time.monotonic()
    if os.path.ismount(mnt):
        p = subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        deadline = time.monotonic() + 30
        while os.path.ismount(mnt) and time.monotonic() < deadline:
            time.sleep(0.1)
            p = subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if os.path.ismount(mnt):
            log("%s: fusermount3 -u: %s; unmounting lazily" % (name, p.stderr.decode(errors="replace").strip()))
            subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
    if proc is None:
        return None
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        held = [l.split()[0] for l in subprocess.run(
            ["sh", "-c", "grep -l ' %s ' /proc/[0-9]*/mountinfo 2>/dev/null" % mnt],
            capture_output=True, text=True).stdout.split()]
        log("%s still running %.0fs after its unmount (mount still held by %d processes' namespaces); "
            "aborting FUSE connection %s" % (name, time.monotonic() - t0, len(held), conn))
        if conn is None or not abort_fuse_conn(conn):
            log("%s: could not abort the connection" % name)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            log("%s did not exit; killing it; threads %s" % (name, threads_of(proc.pid)))
            stop_process(proc)
    return proc.returncode


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------- setup helpers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_ssh_tools():
    return all(shutil.which(t) for t in ("sshfs", "ssh", "ssh-keygen")) and os.path.exists("/usr/sbin/sshd")


def ensure_ssh_packages():
    """Install sshfs and OpenSSH with apt-get when missing. Returns True when usable."""
    if have_ssh_tools():
        return True
    if os.geteuid() != 0:
        log("sshfs/sshd missing and not root: the sshfs side is skipped")
        return False
    log("installing %s" % " ".join(SSH_PACKAGES))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Keep the package's postinst from starting the system sshd.
    policy = "/usr/sbin/policy-rc.d"
    made_policy = False
    if not os.path.exists(policy):
        with open(policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
        made_policy = True
    try:
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + SSH_PACKAGES
        if subprocess.run(cmd, env=env).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env)
            subprocess.run(cmd, env=env)
    finally:
        if made_policy:
            os.unlink(policy)
    ok = have_ssh_tools()
    if not ok:
        log("sshfs/sshd still missing after apt-get: the sshfs side is skipped")
    return ok


class Sshd:
    """A private sshd on a free loopback port: root login by a generated key only."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "sshd")
        os.makedirs(self.dir, mode=0o700)
        self.hostkey = os.path.join(self.dir, "host_ed25519")
        self.key = os.path.join(self.dir, "client_ed25519")
        for path in (self.hostkey, self.key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mbfs-bench", "-f", path],
                           check=True, capture_output=True)
        self.home = os.path.join(self.dir, "home")
        os.mkdir(self.home)
        self.authorized = os.path.join(self.dir, "authorized_keys")
        shutil.copy(self.key + ".pub", self.authorized)
        os.chmod(self.authorized, 0o600)
        # sshd needs its privilege separation directory; a fresh machine may lack it.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.proc = None
        self.log_path = os.path.join(self.dir, "sshd.log")
        for _ in range(5):
            self.port = free_port()
            if self._start():
                return
        raise RuntimeError("private sshd did not start: %s" % self.log())

    def _start(self):
        cfg = os.path.join(self.dir, "sshd_config")
        with open(cfg, "w") as f:
            f.write("\n".join([
                "Port %d" % self.port,
                "ListenAddress 127.0.0.1",
                "HostKey %s" % self.hostkey,
                "PidFile none",
                "AuthorizedKeysFile %s" % self.authorized,
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "UseDNS no",
                "PrintMotd no",
                "Subsystem sftp internal-sftp",
                # The command runs through root's shell; bash reads ~/.bashrc
                # under sshd, which on a developer machine can cost more than
                # ssh itself. An empty HOME keeps that out of the figures.
                "SetEnv HOME=%s" % self.home,
                "MaxStartups 64:30:128",
                "MaxSessions 64",
                "LogLevel ERROR",
                ""]))
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", cfg],
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                     start_new_session=True)
        logf.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return True
            except OSError:
                time.sleep(0.05)
        stop_process(self.proc)
        return False

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-2000:]
        except OSError:
            return ""

    def ssh_options(self):
        return ["IdentityFile=" + self.key, "IdentitiesOnly=yes", "StrictHostKeyChecking=no",
                "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR"]

    def ssh_argv(self, port, *command):
        argv = ["ssh", "-F", "/dev/null"]
        for o in self.ssh_options():
            argv += ["-o", o]
        return argv + ["-p", str(port), "root@127.0.0.1"] + list(command)

    def stop(self):
        stop_process(self.proc)


class DelayProxy:
    """tests/bench/delayproxy.py in a child process."""

    def __init__(self, target_port, delay_ms, max_seconds):
        self.proc = subprocess.Popen(
            [PYTHON, os.path.join(HERE, "delayproxy.py"), "--target", "127.0.0.1:%d" % target_port,
             "--delay-ms", str(delay_ms), "--max-seconds", str(int(max_seconds))],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"listening 127\.0\.0\.1:(\d+)", line)
        if not m:
            stop_process(self.proc)
            raise RuntimeError("delay proxy did not start: %r" % line)
        self.port = int(m.group(1))

    def stop(self):
        stop_process(self.proc)


# ---------------------------------------------------------------- local data

class Data:
    """Inputs prepared once on the local disk: a random file, a tar of a tree
    of small text files, a tar of a git repository."""

    def __init__(self, tmp, big_mib, files, repo_files):
        self.dir = os.path.join(tmp, "data")
        os.makedirs(self.dir)
        self.big_mib = big_mib
        self.files = files
        self.repo_files = repo_files
        rnd = random.Random(42)
        words = ["alpha", "beta", "gamma", "delta", "static", "int", "return", "struct", "void",
                 "include", "buffer", "length", "mount", "inode", "cache", "request", "reply"]

        def text(n, needle=False):
            lines = []
            size = 0
            while size < n:
                line = " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 12)))
                lines.append(line)
                size += len(line) + 1
            if needle:
                lines.insert(rnd.randrange(len(lines)), "here is the %s in the haystack" % NEEDLE)
            return "\n".join(lines) + "\n"

        log("preparing local data: %d MiB random file, %d small files, %d-file git repository"
            % (big_mib, files, repo_files))
        self.big = os.path.join(self.dir, "big.bin")
        with open("/dev/urandom", "rb") as src, open(self.big, "wb") as dst:
            for _ in range(big_mib):
                dst.write(src.read(MIB))

        tree = os.path.join(self.dir, "tree")
        self.tree_dirs = set()
        tops = max(1, files // 200)
        for i in range(files):
            d = os.path.join(tree, "top%02d" % (i % tops), "sub%d" % (i // tops % 5))
            self.tree_dirs.add(d)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "file%04d.txt" % i), "w") as f:
                f.write(text(rnd.randint(100, 4000), needle=(i % 20 == 0)))
        self.tree_tar = os.path.join(self.dir, "tree.tar")
        subprocess.run(["tar", "cf", self.tree_tar, "--sort=name", "--owner=0", "--group=0",
                        "--numeric-owner", "-C", tree, "."], check=True)

        repo = os.path.join(self.dir, "repo")
        for i in range(repo_files):
            d = os.path.join(repo, "src", "mod%02d" % (i % 20))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "unit%04d.c" % i), "w") as f:
                f.write("/* unit %d */\n" % i + text(rnd.randint(200, 3000)))
        with open(os.path.join(repo, "README"), "w") as f:
            f.write("benchmark repository\n")
        genv = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
                    GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
                    GIT_CONFIG_NOSYSTEM="1", HOME=self.dir)
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                    ["git", "commit", "-q", "-m", "initial"], ["git", "repack", "-adq"],
                    ["git", "prune-packed"], ["git", "gc", "-q", "--prune=now"]):
            subprocess.run(cmd, cwd=repo, env=genv, check=True, capture_output=True)
        self.repo_tar = os.path.join(self.dir, "repo.tar")
        subprocess.run(["tar", "cf", self.repo_tar, "--sort=name", "--owner=0", "--group=0",
                        "--numeric-owner", "-C", repo, "."], check=True)
        git_files = sum(len(fs) for _, _, fs in os.walk(os.path.join(repo, ".git")))
        log("repository: %d files in the work tree, %d under .git" % (repo_files + 1, git_files))


# ---------------------------------------------------------------- backends

class Backend:
    """A mounted filesystem under test."""
    name = "?"

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def reset_stats(self):
        pass

    def requests(self):
        return None

    def remount(self):
        """Unmount and mount again: nothing cached, in the kernel or the daemon."""
        raise NotImplementedError

    def seed_tar(self, tar, subdir):
        """Unpack a local tar into SUBDIR of the remote directory, behind the mount."""
        raise NotImplementedError

    def exec_true(self):
        """argv, cwd and env of one remote `true`."""
        raise NotImplementedError


class MbfsBackend(Backend):
    name = "mbfs"

    def __init__(self, ctx, latency):
        self.ctx = ctx
        self.latency = latency
        self.mount = None
        self._mnt_undo = None
        self.service = mbtest.Service(latency_ms=latency)
        self._svc_undo = CLEANUP.push(self.service.stop)
        try:
            self.ident = self.service.create_container()
            self.mnt = os.path.join(ctx.tmp, "mnt-mbfs-%dms" % latency)
            os.makedirs(self.mnt)
            self._mount()
        except BaseException:
            self.stop()
            raise

    def _mount(self):
        self.mount = mbtest.Mount(self.service, self.ident, options=self.ctx.mbfs_opts, mountpoint=self.mnt)
        self._mnt_undo = CLEANUP.push(self._unmount)
        self.conn = fuse_conn_id(self.mnt)

    def _unmount(self):
        if self.mount is not None:
            rc = unmount_daemon("mbfs", self.mnt, self.mount.proc, self.conn)
            self.mount.unmount()  # closes its log; nothing left to do otherwise
            tail = self.mount.log()[-1500:]
            if rc not in (0, None):
                log("mbfs exited %s; log tail:\n%s" % (rc, tail))
            if mbtest.sanitizer_report(tail):
                log("mbfs log shows a sanitizer report:\n%s" % tail)
            self.mount = None

    def remount(self):
        CLEANUP.run(self._mnt_undo)
        self._mount()

    def reset_stats(self):
        self.service.reset_stats()

    def requests(self):
        doc = self.service.stats()
        return {k: v for k, v in doc.get("requests", {}).items() if "/_local" not in k}

    def seed_tar(self, tar, subdir):
        """Unpack a local tar into /workspace/SUBDIR on the guest, behind the mount."""
        stage = "/tmp/mbbench-seed"
        with open(tar, "rb") as f:
            data = f.read()
        self._guest("rm -rf %s && mkdir -p %s" % (stage, stage))
        for i in range(0, len(data), MIB):
            self.service.put_file(self.ident, "%s/part.%06d" % (stage, i // MIB), data[i:i + MIB])
        self._guest("mkdir -p /workspace/%s && cat %s/part.* | tar -x -C /workspace/%s && rm -rf %s"
                    % (subdir, stage, subdir, stage))

    def _guest(self, command):
        doc = self.service.exec(self.ident, command, timeout_ms=60000)
        if doc.get("exitCode") != 0:
            raise Failed("guest command failed: %s: %s" % (command, (doc.get("stderr") or str(doc))[:160]))
        return doc

    def exec_true(self):
        if not os.path.exists(mbtest.MBEXEC):
            raise Failed("%s is missing" % mbtest.MBEXEC)
        return [mbtest.MBEXEC, "true"], self.mnt, self.service.env()

    def stop(self):
        if self._mnt_undo:
            CLEANUP.run(self._mnt_undo)
        if getattr(self, "ident", None):
            with contextlib.suppress(Exception):
                self.service.delete_container(self.ident)
        CLEANUP.run(self._svc_undo)


class SshfsBackend(Backend):
    name = "sshfs"

    def __init__(self, ctx, latency):
        self.ctx = ctx
        self.sshd = ctx.sshd
        self.proxy = None
        self.proc = None
        self.port = self.sshd.port
        self._mnt_undo = None
        if latency > 0:
            self.proxy = DelayProxy(self.sshd.port, latency, ctx.max_seconds)
            self._proxy_undo = CLEANUP.push(self.proxy.stop)
            self.port = self.proxy.port
        try:
            self.export = os.path.join(ctx.tmp, "sshfs-export-%dms" % latency)
            os.makedirs(self.export)
            self.mnt = os.path.join(ctx.tmp, "mnt-sshfs-%dms" % latency)
            os.makedirs(self.mnt)
            self.log_path = os.path.join(ctx.tmp, "sshfs-%dms.log" % latency)
            self._mount()
        except BaseException:
            self.stop()
            raise

    def _mount(self):
        opts = ",".join(self.sshd.ssh_options() + self.ctx.sshfs_opts)
        argv = ["sshfs", "-f", "-F", "/dev/null", "-o", opts, "-p", str(self.port),
                "root@127.0.0.1:" + self.export, self.mnt]
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                     start_new_session=True)
        logf.close()
        self._mnt_undo = CLEANUP.push(self._unmount)
        self.conn = None
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.ismount(self.mnt):
                self.conn = fuse_conn_id(self.mnt)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        CLEANUP.run(self._mnt_undo)
        with open(self.log_path, "rb") as f:
            raise RuntimeError("sshfs did not mount: %s" % f.read().decode(errors="replace")[-2000:])

    def _unmount(self):
        if self.proc is not None:
            rc = unmount_daemon("sshfs", self.mnt, self.proc, self.conn)
            if rc not in (0, None):
                log("sshfs exited %s" % rc)
            self.proc = None

    def remount(self):
        CLEANUP.run(self._mnt_undo)
        self._mount()

    def seed_tar(self, tar, subdir):
        """Unpack a local tar into the exported directory, behind the mount."""
        d = os.path.join(self.export, subdir)
        os.makedirs(d, exist_ok=True)
        run(["tar", "-x", "-f", tar, "-C", d])

    def exec_true(self):
        return self.sshd.ssh_argv(self.port, "true"), None, None

    def stop(self):
        if self._mnt_undo:
            CLEANUP.run(self._mnt_undo)
        if self.proxy is not None:
            CLEANUP.run(self._proxy_undo)


# ---------------------------------------------------------------- workloads

class Failed(Exception):
    pass


class Timeout(Failed):
    pass


def run(argv, cwd=None, env=None, timeout=1200, ok=(0,)):
    """Run a command; return seconds of wall time. Raises Failed on a bad exit."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, timeout=timeout,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        raise Timeout("timed out after %ds" % timeout)
    dt = time.perf_counter() - t0
    if p.returncode not in ok:
        first = (p.stderr.decode(errors="replace").strip().splitlines() or [""])[0]
        raise Failed("exit %d: %s" % (p.returncode, first[:160]))
    return dt


class Sample:
    capped = False     # stopped at --cap; seconds is the cap
    estimate = None    # then: the whole run's time, extrapolated

    def __init__(self, seconds, requests=None, note=None):
        self.seconds = seconds
        self.requests = requests
        self.note = note


def measure(b, fn):
    """Time fn() on backend b, with the API requests it made (mbfs)."""
    b.reset_stats()
    seconds = fn()
    return Sample(seconds, b.requests())


def git_argv(path, *args):
    # Files on the mount may belong to another uid than the one running git.
    return ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-C", path] + list(args)


# Each workload: result keys, an optional setup(ctx, b) run once untimed, and
# one(ctx, b, r) for run r, returning one Sample per key.

def seqwrite_setup(ctx, b):
    os.makedirs(b.path("seq"), exist_ok=True)


def seqwrite_one(ctx, b, r):
    dst = b.path("seq", "big-%d" % r)
    return [measure(b, lambda: run(["dd", "if=" + ctx.data.big, "of=" + dst, "bs=1M", "status=none"]))]


def seqread_setup(ctx, b):
    if not os.path.exists(b.path("seq", "big-0")):
        seqwrite_setup(ctx, b)
        run(["dd", "if=" + ctx.data.big, "of=" + b.path("seq", "big-0"), "bs=1M", "status=none"])


def seqread_one(ctx, b, r):
    b.remount()  # nothing cached, in the kernel or in the filesystem
    src = b.path("seq", "big-0")
    sample = measure(b, lambda: run(["dd", "if=" + src, "of=/dev/null", "bs=1M", "status=none"]))
    if r == 0:  # check the bytes once, untimed
        try:
            run(["cmp", "-s", ctx.data.big, src], timeout=600)
        except Failed as e:
            sample.note = "content MISMATCH (%s)" % e
    return [sample]


def untar_one(ctx, b, r):
    """tar x into a fresh directory. A run longer than --cap is stopped and
    reported with an estimate from the share of files it wrote."""
    d = b.path("untar-%d" % r)
    os.mkdir(d)
    b.reset_stats()
    try:
        seconds = run(["tar", "-x", "--no-same-owner", "-f", ctx.data.tree_tar, "-C", d], timeout=ctx.cap)
    except Timeout:
        done = sum(len(fs) for _, _, fs in os.walk(d))
        sample = Sample(ctx.cap, b.requests())
        sample.capped = True
        sample.estimate = ctx.cap * ctx.data.files / done if done else None
        sample.note = "stopped at %ds with %d of %d files written" % (ctx.cap, done, ctx.data.files)
        return [sample]
    return [Sample(seconds, b.requests())]


def tree_setup(ctx, b):
    """ls, find and grep work on a copy of the same tree put in behind the mount."""
    if not os.path.isdir(b.path("tree")):
        b.seed_tar(ctx.data.tree_tar, "tree")
        b.remount()


def ls_one(ctx, b, r):
    b.remount()
    return [measure(b, lambda: run(["ls", "-lR", b.path("tree")]))]


def find_one(ctx, b, r):
    b.remount()
    return [measure(b, lambda: run(["find", b.path("tree")]))]


def grep_one(ctx, b, r):
    argv = ["grep", "-r", "-c", NEEDLE, b.path("tree")]
    b.remount()
    cold = measure(b, lambda: run(argv, ok=(0, 1)))
    warm = measure(b, lambda: run(argv, ok=(0, 1)))
    return [cold, warm]


def git_setup(ctx, b):
    """The repository goes in behind the mount (it is set-up, not a workload),
    then one untimed `git status` through the mount writes the index's stat
    data as this filesystem reports them."""
    t0 = time.perf_counter()
    b.seed_tar(ctx.data.repo_tar, "repo")
    b.remount()
    run(git_argv(b.path("repo"), "status", "--porcelain"))
    log("  %s: repository seeded and indexed in %.1fs" % (b.name, time.perf_counter() - t0))


def git_one(ctx, b, r):
    argv = git_argv(b.path("repo"), "status", "--porcelain")
    b.remount()
    cold = measure(b, lambda: run(argv))
    warm = measure(b, lambda: run(argv))
    if r == 0:  # a clean tree must stay clean
        p = subprocess.run(argv, capture_output=True, timeout=600)
        if p.returncode or p.stdout.strip():
            cold.note = "git status not clean: %s" % (p.stdout + p.stderr).decode(errors="replace").splitlines()[0][:80]
    return [cold, warm]


def exec_one(ctx, b, r):
    argv, cwd, env = b.exec_true()

    def loop():
        total = 0.0
        for _ in range(ctx.exec_count):
            total += run(argv, cwd=cwd, env=env, timeout=120)
        return total
    return [measure(b, loop)]


class Raw:
    """A plain keep-alive HTTP client on the files route: the API's own limit."""

    def __init__(self, service, ident):
        self.service = service
        self.ident = ident
        u = urllib.parse.urlsplit(service.url)
        self.host, self.port = u.hostname, u.port
        assert self.host == "127.0.0.1"

    def _query(self, path):
        return "/containers/files?" + urllib.parse.urlencode(
            {"id": self.ident["id"], "createdAt": self.ident["createdAt"], "path": path},
            quote_via=urllib.parse.quote)

    def parallel(self, jobs, workers=4):
        """jobs: (method, remote path, body or None). Returns seconds, bytes moved."""
        q = queue.Queue()
        for j in jobs:
            q.put(j)
        moved = [0] * workers
        errors = []

        def worker(i):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            hdrs = {"Authorization": "Bearer " + self.service.key}
            try:
                while True:
                    try:
                        method, path, body = q.get_nowait()
                    except queue.Empty:
                        return
                    h = dict(hdrs)
                    if body is not None:
                        h["Content-Type"] = "application/octet-stream"
                    conn.request(method, self._query(path), body=body, headers=h)
                    resp = conn.getresponse()
                    data = resp.read()
                    if resp.status != 200:
                        errors.append("%s %s: %d %s" % (method, path, resp.status, data[:100]))
                        return
                    moved[i] += len(data) if body is None else len(body)
            except (OSError, http.client.HTTPException) as e:
                errors.append(str(e))
            finally:
                conn.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        if errors:
            raise Failed(errors[0])
        return dt, sum(moved)


RAW_DIR = "/workspace/.bench-raw"


def split_names(n):
    return ["part.%s" % "".join(chr(97 + (i // 26 ** k) % 26) for k in (3, 2, 1, 0)) for i in range(n)]


def raw_setup(ctx, b):
    seqread_setup(ctx, b)
    doc = b.service.exec(b.ident, "rm -rf %s && mkdir -p %s && split -b 1048576 -a 4 /workspace/seq/big-0 %s/part."
                         % (RAW_DIR, RAW_DIR, RAW_DIR), timeout_ms=60000)
    if doc.get("exitCode") != 0:
        raise Failed("split on the guest failed: %s" % (doc.get("stderr") or doc)[:160])
    with open(ctx.data.big, "rb") as f:
        b.raw_chunks = [f.read(MIB) for _ in range(ctx.data.big_mib)]


def raw_one(ctx, b, r):
    """Parallel (4) 1 MiB GETs of the file pre-split on the guest, and parallel
    1 MiB PUTs of the same bytes."""
    raw = Raw(b.service, b.ident)
    b.reset_stats()
    dt, n = raw.parallel([("GET", "%s/%s" % (RAW_DIR, nm), None) for nm in split_names(ctx.data.big_mib)])
    get = Sample(dt, b.requests(), None if n == ctx.data.big_mib * MIB else "got %d bytes" % n)
    b.reset_stats()
    dt, n = raw.parallel([("PUT", "%s/up-%d.%04d" % (RAW_DIR, r, i), c) for i, c in enumerate(b.raw_chunks)])
    return [get, Sample(dt, b.requests())]


class Workload:
    def __init__(self, name, keys, one, setup=None, backends=("mbfs", "sshfs")):
        self.name, self.keys, self.one, self.setup, self.backends = name, keys, one, setup, backends


WORKLOADS = [
    Workload("seqwrite", ["seqwrite"], seqwrite_one, seqwrite_setup),
    Workload("seqread", ["seqread"], seqread_one, seqread_setup),
    Workload("raw", ["raw-get", "raw-put"], raw_one, raw_setup, backends=("mbfs",)),
    Workload("untar", ["untar"], untar_one),
    Workload("ls", ["ls"], ls_one, tree_setup),
    Workload("find", ["find"], find_one, tree_setup),
    Workload("grep", ["grep-cold", "grep-warm"], grep_one, tree_setup),
    Workload("git", ["git-cold", "git-warm"], git_one, git_setup),
    Workload("exec", ["exec"], exec_one),
]


# ---------------------------------------------------------------- driver

class Result:
    def __init__(self):
        # (latency, key) -> {backend name: [Sample] or Failed}
        self.rows = {}
        self.order = []

    def add(self, latency, key, backend, value):
        k = (latency, key)
        if k not in self.rows:
            self.rows[k] = {}
            self.order.append(k)
        self.rows[k][backend] = value


def label(ctx, key):
    d = ctx.data
    return {
        "seqwrite": "seq write %d MiB (dd bs=1M)" % d.big_mib,
        "seqread": "seq read %d MiB, cold (dd bs=1M)" % d.big_mib,
        "untar": "tar x, %d small files" % d.files,
        "ls": "ls -lR, %d files, cold" % d.files,
        "find": "find, %d files, cold" % d.files,
        "grep-cold": "grep -r, %d files, cold" % d.files,
        "grep-warm": "grep -r, %d files, warm" % d.files,
        "git-cold": "git status, %d files, cold" % d.repo_files,
        "git-warm": "git status, %d files, warm" % d.repo_files,
        "exec": "%d x remote `true` (mbexec / ssh)" % ctx.exec_count,
        "raw-get": "raw: %d x 1 MiB GET, 4 parallel" % d.big_mib,
        "raw-put": "raw: %d x 1 MiB PUT, 4 parallel" % d.big_mib,
    }[key]


def run_workload(ctx, w, b, latency, result):
    """Up to --repeat runs of w on b; no new run once --budget seconds are spent."""
    def fail(e):
        log("  %s failed: %s" % (w.name, e))
        for k in w.keys:
            result.add(latency, k, b.name, e if isinstance(e, Failed) else Failed(repr(e)[:200]))

    if time.monotonic() > ctx.deadline:
        for k in w.keys:
            result.add(latency, k, b.name, Failed("skipped: over --max-minutes"))
        return
    log("%s @ %d ms: %s" % (b.name, latency, w.name))
    samples = [[] for _ in w.keys]
    try:
        if w.setup:
            w.setup(ctx, b)
        t0 = time.monotonic()
        for r in range(ctx.repeat):
            if r and (time.monotonic() - t0 > ctx.budget or time.monotonic() > ctx.deadline):
                break
            for lst, smp in zip(samples, w.one(ctx, b, r)):
                lst.append(smp)
    except (Failed, OSError, RuntimeError, AssertionError, subprocess.SubprocessError) as e:
        if not samples[0]:
            return fail(e)
        log("  %s: run %d failed, keeping the earlier runs: %s" % (w.name, len(samples[0]) + 1, e))
    for k, lst in zip(w.keys, samples):
        result.add(latency, k, b.name, lst)
        log("  %-9s %s%s" % (k, " ".join("%.3fs" % x.seconds for x in lst),
                             "  requests %s" % [sum(x.requests.values()) for x in lst]
                             if lst[0].requests is not None else ""))


def median_seconds(v):
    """Median of a cell's runs, with the estimate standing for a capped run;
    and whether any run was capped."""
    capped = any(x.capped for x in v)
    return statistics.median(x.estimate if x.capped and x.estimate else x.seconds for x in v), capped


def fmt_seconds(v):
    if isinstance(v, Failed):
        return "FAIL"
    if v is None:
        return "—"
    med, capped = median_seconds(v)
    if capped:
        return ">%g (~%.0f)" % (max(x.seconds for x in v), med)
    return "%.3f" % med


def median_requests(v):
    if not isinstance(v, list) or not v or v[0].requests is None:
        return None
    return statistics.median(sum(s.requests.values()) for s in v)


def build_report(ctx, result, started, partial=False):
    lines = []
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    sshfs_ver = "—"
    if ctx.sshd:
        p = subprocess.run(["sshfs", "--version"], capture_output=True, text=True)
        m = re.search(r"SSHFS version (\S+)", p.stdout + p.stderr)
        sshfs_ver = "sshfs " + (m.group(1) if m else "?")
    lines.append("## Benchmark results%s%s" % (" (quick run)" if ctx.quick else "",
                                                ", INTERRUPTED: partial" if partial else ""))
    lines.append("")
    lines.append("`tests/bench/bench.py%s` on %s, commit %s, %d CPUs, %s. "
                 "Seconds, median of up to %d runs (no further run of a workload once its runs took %g s; "
                 "the runs column says how many), lower is better; a `tar x` run is stopped after %g s and "
                 "shown as >%g (~estimate from the share of files written). "
                 "mbfs: the local service (`tests/localservice.py --latency-ms L`). "
                 "sshfs: %s with default options, on a private sshd over loopback, "
                 "through `tests/bench/delayproxy.py` adding L ms per round trip when L > 0. "
                 "mbfs requests: API requests of one mbfs run, from `/_local/stats`."
                 % (" " + " ".join(ctx.argv) if ctx.argv else "", time.strftime("%Y-%m-%d"), commit or "?",
                    os.cpu_count(), platform_name(), ctx.repeat, ctx.budget, ctx.cap, ctx.cap, sshfs_ver))
    lines.append("")
    lines.append("| latency | workload | mbfs s | sshfs s | mbfs/sshfs | mbfs requests | runs | notes |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---|")
    details = []
    for (lat, key) in result.order:
        row = result.rows[(lat, key)]
        m, s = row.get("mbfs"), row.get("sshfs")
        ratio = "—"
        if isinstance(m, list) and isinstance(s, list) and m and s:
            (mm, mc), (sm, sc) = median_seconds(m), median_seconds(s)
            if sm > 0:
                ratio = ("~%.1f" if mc or sc else "%.2f") % (mm / sm)
        req = median_requests(m)
        notes = []
        for v, who in ((m, "mbfs"), (s, "sshfs")):
            if isinstance(v, Failed):
                notes.append("%s: %s" % (who, str(v).replace("|", "/")))
            elif isinstance(v, list):
                notes += ["%s: %s" % (who, x.note) for x in v if x.note]
        if key in ("seqwrite", "seqread", "raw-get", "raw-put"):
            for v, who in ((m, "mbfs"), (s, "sshfs")):
                if isinstance(v, list) and v:
                    notes.append("%s %.0f MiB/s" % (who, ctx.data.big_mib / statistics.median(x.seconds for x in v)))
        if key == "exec":
            for v, who in ((m, "mbexec"), (s, "ssh")):
                if isinstance(v, list) and v:
                    notes.append("%s %.0f ms/call" % (who, 1000 * statistics.median(x.seconds for x in v) / ctx.exec_count))
        runs = "/".join(str(len(v)) if isinstance(v, list) else "0" for v in (m, s) if v is not None)
        lines.append("| %d ms | %s | %s | %s | %s | %s | %s | %s |" % (
            lat, label(ctx, key), fmt_seconds(m), fmt_seconds(s), ratio,
            "—" if req is None else "%g" % req, runs, "; ".join(notes)))
        if isinstance(m, list) and m and m[0].requests:
            routes = {}
            for x in m:
                for k2, n in x.requests.items():
                    routes[k2] = routes.get(k2, 0) + n
            top = sorted(routes.items(), key=lambda kv: -kv[1])
            details.append("| %d ms | %s | %s |" % (lat, label(ctx, key), ", ".join(
                "%s %g" % (k2, round(n / len(m), 1)) for k2, n in top[:6])))

    lines.append("")
    lines.append("### Throughput against the raw limit of the API")
    lines.append("")
    lines.append("Raw: the same bytes as %d separate 1 MiB files (pre-split on the guest with "
                 "`split -b 1048576` through the exec route), moved by 4 threads with keep-alive "
                 "`http.client` connections." % ctx.data.big_mib)
    lines.append("")
    lines.append("| latency | mbfs read MiB/s | raw GET MiB/s | mbfs/raw | mbfs write MiB/s | raw PUT MiB/s | mbfs/raw |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|")
    for lat in ctx.latencies:
        def rate(key):
            v = result.rows.get((lat, key), {}).get("mbfs")
            if isinstance(v, list) and v:
                return ctx.data.big_mib / statistics.median(x.seconds for x in v)
            return None
        rr, rg, rw, rp = rate("seqread"), rate("raw-get"), rate("seqwrite"), rate("raw-put")
        f = lambda x: "—" if x is None else "%.0f" % x
        q = lambda a, b: "—" if a is None or b is None else "%.2f" % (a / b)
        lines.append("| %d ms | %s | %s | %s | %s | %s | %s |" % (lat, f(rr), f(rg), q(rr, rg), f(rw), f(rp), q(rw, rp)))
    if details:
        lines.append("")
        lines.append("### mbfs requests per run, by route")
        lines.append("")
        lines.append("| latency | workload | requests per run |")
        lines.append("|---:|---|---|")
        lines += details
    lines.append("")
    lines.append("Total bench time: %.0f s." % (time.monotonic() - started))
    return "\n".join(lines) + "\n"


def platform_name():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return sys.platform


class Ctx:
    pass


def run_latency(ctx, names, latency, result):
    """Both sides mounted at once; each workload runs on one, then the other,
    so a time limit cuts both at the same place."""
    started = []
    try:
        for name in names:
            cls = MbfsBackend if name == "mbfs" else SshfsBackend
            try:
                started.append(cls(ctx, latency))
            except (RuntimeError, OSError, AssertionError, subprocess.SubprocessError) as e:
                log("%s @ %d ms: could not start: %s" % (name, latency, e))
                for w in ctx.workloads:
                    for k in w.keys:
                        result.add(latency, k, name, Failed("did not start"))
        for w in ctx.workloads:
            for b in started:
                if b.name in w.backends:
                    run_workload(ctx, w, b, latency, result)
    finally:
        for b in reversed(started):
            b.stop()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description="mbfs vs sshfs benchmarks (figures only, nothing asserted)")
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, one run each")
    ap.add_argument("--repeat", type=int, help="runs of each timed workload (default 3, quick 1)")
    ap.add_argument("--budget", type=float, default=60,
                    help="no further run of a workload once its runs took this many seconds (default 60)")
    ap.add_argument("--latencies", default="0,20", help="added round-trip latencies in ms (default 0,20)")
    ap.add_argument("--backends", default="mbfs,sshfs", help="mbfs,sshfs (default both)")
    ap.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS), help="subset of " + ",".join(w.name for w in WORKLOADS))
    ap.add_argument("--size-mib", type=int, help="size of the sequential file (default 64, quick 8)")
    ap.add_argument("--files", type=int, help="small files in the tar (default 2000, quick 200)")
    ap.add_argument("--repo-files", type=int, help="files in the git repository (default 1000, quick 100)")
    ap.add_argument("--exec-count", type=int, help="remote `true` calls per run (default 50, quick 10)")
    ap.add_argument("--mbfs-opt", action="append", default=[], help="extra -o option for mbfs")
    ap.add_argument("--sshfs-opt", action="append", default=[], help="extra -o option for sshfs")
    ap.add_argument("--cap", type=float, help="stop a tar x run after this many seconds and extrapolate "
                    "(default 120, quick 60)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-results.md"))
    ap.add_argument("--max-minutes", type=float, default=45, help="skip what remains after this long")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the scratch directory")
    args = ap.parse_args(argv)

    ctx = Ctx()
    ctx.argv = argv
    ctx.quick = args.quick
    ctx.repeat = args.repeat or (1 if args.quick else 3)
    ctx.latencies = [int(x) for x in args.latencies.split(",") if x != ""]
    ctx.budget = args.budget
    ctx.cap = args.cap or (60 if args.quick else 120)
    chosen = [w for w in args.workloads.split(",") if w]
    bad = set(chosen) - {w.name for w in WORKLOADS}
    if bad:
        ap.error("unknown workloads: %s" % ", ".join(sorted(bad)))
    ctx.workloads = [w for w in WORKLOADS if w.name in chosen]
    backends = [x for x in args.backends.split(",") if x]
    ctx.exec_count = args.exec_count or (10 if args.quick else 50)
    ctx.mbfs_opts = args.mbfs_opt
    ctx.sshfs_opts = args.sshfs_opt
    ctx.max_seconds = args.max_minutes * 60 + 600
    started = time.monotonic()
    ctx.deadline = started + args.max_minutes * 60

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    if not mbtest.fuse_available():
        sys.exit("bench: needs /dev/fuse and fusermount3 (make deps)")
    if "mbfs" in backends:
        missing = [p for p in (mbtest.MBFS, mbtest.SERVICE) if not os.path.exists(p)]
        if missing:
            log("missing %s: the mbfs side is skipped (run make)" % ", ".join(missing))
            backends.remove("mbfs")
    ctx.sshd = None
    if "sshfs" in backends and not ensure_ssh_packages():
        backends.remove("sshfs")

    base = os.environ.get("MB_TEST_TMP", "/var/tmp")
    ctx.tmp = tempfile.mkdtemp(prefix="mbbench-", dir=base)
    os.environ["MB_TEST_TMP"] = ctx.tmp  # services and their logs go under it too
    CLEANUP.push(remove_tmp, ctx.tmp, args.keep_tmp)
    CLEANUP.push(force_unmount_under, ctx.tmp + "/")
    result = Result()
    interrupted = None
    try:
        ctx.data = Data(ctx.tmp, args.size_mib or (8 if args.quick else 64),
                        args.files or (200 if args.quick else 2000),
                        args.repo_files or (100 if args.quick else 1000))
        if "sshfs" in backends:
            try:
                ctx.sshd = Sshd(ctx.tmp)
                CLEANUP.push(ctx.sshd.stop)
                log("private sshd on 127.0.0.1:%d" % ctx.sshd.port)
            except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                log("sshfs side skipped: %s" % e)
                backends.remove("sshfs")
        for latency in ctx.latencies:
            run_latency(ctx, backends, latency, result)
    except (KeyboardInterrupt, SystemExit) as e:
        interrupted = e
        log("interrupted (%s); cleaning up" % (type(e).__name__ if isinstance(e, KeyboardInterrupt) else e.code))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # every step below is bounded
        CLEANUP.run_all()
    if not hasattr(ctx, "data"):
        return 1
    report = build_report(ctx, result, started, partial=interrupted is not None)
    print()
    print(report)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    log("wrote %s" % args.out)
    if interrupted is not None:
        return 130 if isinstance(interrupted, KeyboardInterrupt) else interrupted.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
