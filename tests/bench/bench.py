#!/usr/bin/python3
"""Benchmarks: mbfs and mbexec on the local service against sshfs and ssh
over loopback, with a directory on the local disk as the floor.

Runs the same workloads in a local directory (once: latency does not apply),
through mbfs (local service, tests/localservice.py) and, when sshfs and sshd
are available, through sshfs on a private sshd (its own host key, config and
port; the system sshd is never touched), at 0 ms and at 20 ms of added
round-trip latency: the service's --latency-ms for mbfs and mbexec,
tests/bench/delayproxy.py in front of sshd for sshfs and ssh. Remote-command
workloads run mbexec (cwd in the mount) against ssh to the same sshd. Prints
a table of medians, ratios mbfs/sshfs and mbfs/local, the API requests each
mbfs run made, mbfs throughput against the raw limit of the API (parallel
1 MiB GETs and PUTs by a plain keep-alive HTTP client), and the targets of
issues 9 and 11 next to the figures. Writes the same as markdown to
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
import shlex
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

    def __init__(self, tmp, big_mib, files, repo_files, npm_files):
        self.dir = os.path.join(tmp, "data")
        os.makedirs(self.dir)
        self.big_mib = big_mib
        self.files = files
        self.repo_files = repo_files
        self.npm_files = npm_files
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

        log("preparing local data: %d MiB random file, %d small files, %d-file git repository, "
            "%d-file npm-like tree" % (big_mib, files, repo_files, npm_files))
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

        # An npm-like tree: packages of 20 files of 1-4 KB in four
        # directories each (the package, lib/, lib/util/, dist/).
        self.npm = os.path.join(self.dir, "node_modules")
        layout = (["package.json", "README.md", "LICENSE", "index.js"] +
                  ["lib/%s.js" % n for n in ("core", "parse", "format", "stream", "errors", "types",
                                             "options", "cache", "path", "compat")] +
                  ["lib/util/%s.js" % n for n in ("assert", "buffer", "debug")] +
                  ["dist/%s.min.js" % n for n in ("index", "browser", "esm")])
        for i in range(npm_files):
            pkg, rel = divmod(i, len(layout))
            path = os.path.join(self.npm, "pkg-%04d" % pkg, layout[rel])
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
            with open(path, "w") as f:
                f.write(text(rnd.randint(1024, 4096))[:4096])
        self.npm_dirs = sum(1 for _ in os.walk(self.npm))
        log("npm-like tree: %d files in %d directories" % (npm_files, self.npm_dirs))


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

    def snapshot(self):
        """What the service counted since reset_stats(): (requests by route,
        peak concurrent operations, 429 answers), or (None, None, None)."""
        return None, None, None

    def remount(self):
        """Unmount and mount again: nothing cached, in the kernel or the daemon."""
        raise NotImplementedError

    def seed_tar(self, tar, subdir):
        """Unpack a local tar into SUBDIR of the remote directory, behind the mount."""
        raise NotImplementedError

    def count_files(self, subdir):
        """Regular files under SUBDIR, counted behind the mount."""
        raise NotImplementedError

    def settle(self):
        """Seconds until what the workload wrote is on the remote side
        (mbfs: `mbfs --status --wait`, part of the timed run)."""
        return 0.0

    def command(self, *argv):
        """argv, cwd and env that run ARGV on the remote side."""
        raise NotImplementedError

    def exec_true(self):
        """argv, cwd and env of one remote `true`."""
        return self.command("true")


def count_local_files(d):
    return sum(len(fs) for _, _, fs in os.walk(d))


class LocalBackend(Backend):
    """A directory on the local disk: the floor every other figure is held to.
    Commands run locally. "Remount" writes back and then drops the page cache
    of the directory's own files (posix_fadvise DONTNEED, file by file: the
    machine is shared, so never drop_caches); dentries and inodes stay cached."""
    name = "local"

    def __init__(self, ctx, latency):
        self.ctx = ctx
        self.mnt = os.path.join(ctx.tmp, "local")
        os.makedirs(self.mnt)
        p = subprocess.run(["df", "--output=fstype", self.mnt], capture_output=True, text=True)
        self.fstype = (p.stdout.split() or ["?", "?"])[-1]

    def remount(self):
        subprocess.run(["sync", "-f", self.mnt], capture_output=True)
        for top, _, files in os.walk(self.mnt):
            for fn in files:
                try:
                    fd = os.open(os.path.join(top, fn), os.O_RDONLY | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError:
                    pass
                finally:
                    os.close(fd)

    def seed_tar(self, tar, subdir):
        d = os.path.join(self.mnt, subdir)
        os.makedirs(d, exist_ok=True)
        run(["tar", "-x", "-f", tar, "-C", d])

    def count_files(self, subdir):
        return count_local_files(os.path.join(self.mnt, subdir))

    def command(self, *argv):
        return list(argv), self.mnt, None

    def stop(self):
        pass


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
        self.mount = mbtest.Mount(self.service, self.ident, options=self.ctx.mbfs_opts, mountpoint=self.mnt,
                                  writeback=True)
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

    def settle(self):
        return run([mbtest.MBFS, "--status", "--wait", self.mnt])

    def reset_stats(self):
        self.service.reset_stats()

    def requests(self):
        return self.snapshot()[0]

    def snapshot(self):
        doc = self.service.stats()
        reqs = {k: v for k, v in doc.get("requests", {}).items() if "/_local" not in k}
        peak = max(list(doc.get("peakConcurrentOps", {}).values()) or [0])
        throttled = sum(per.get("429", 0) for k, per in doc.get("statuses", {}).items() if "/_local" not in k)
        return reqs, peak, throttled

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

    def count_files(self, subdir):
        doc = self._guest("find /workspace/%s -type f | wc -l" % subdir)
        return int((doc.get("stdout") or "0").strip() or 0)

    def command(self, *argv):
        """mbexec with its cwd in the mount: it finds the mount and runs through it."""
        if not os.path.exists(mbtest.MBEXEC):
            raise Failed("%s is missing" % mbtest.MBEXEC)
        return [mbtest.MBEXEC] + list(argv), self.mnt, self.service.env()

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

    def count_files(self, subdir):
        return count_local_files(os.path.join(self.export, subdir))

    def command(self, *argv):
        """ssh to the same sshd (through the delay proxy at L > 0)."""
        return self.sshd.ssh_argv(self.port, *argv), None, None

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


def run_output(argv, cwd=None, env=None, timeout=1200):
    """Run a command; return (seconds of wall time, its stdout). Raises Failed on a bad exit."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, timeout=timeout,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        raise Timeout("timed out after %ds" % timeout)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        first = (p.stderr.decode(errors="replace").strip().splitlines() or [""])[0]
        raise Failed("exit %d: %s" % (p.returncode, first[:160]))
    return dt, p.stdout.decode(errors="replace")


class Sample:
    capped = False     # stopped at --cap; seconds is the cap
    estimate = None    # then: the whole run's time, extrapolated
    peak = None        # the service's peakConcurrentOps during the run (mbfs)
    throttled = None   # 429 answers the service gave during the run (mbfs)

    def __init__(self, seconds, requests=None, note=None):
        self.seconds = seconds
        self.requests = requests
        self.note = note


def sample_of(b, seconds, note=None):
    """A Sample with what the service counted since b.reset_stats()."""
    reqs, peak, throttled = b.snapshot()
    smp = Sample(seconds, reqs, note)
    smp.peak, smp.throttled = peak, throttled
    return smp


def measure(b, fn):
    """Time fn() on backend b, with the API requests it made (mbfs)."""
    b.reset_stats()
    seconds = fn()
    return sample_of(b, seconds)


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


def capped_sample(ctx, b, done, total, what="files written"):
    """A run stopped at --cap: the estimate is the cap over the share done."""
    sample = sample_of(b, ctx.cap)
    sample.capped = True
    sample.estimate = ctx.cap * total / done if done else None
    sample.note = "stopped at %ds with %d of %d %s" % (ctx.cap, done, total, what)
    return sample


def untar_one(ctx, b, r):
    """tar x into a fresh directory. A run longer than --cap is stopped and
    reported with an estimate from the share of files it wrote."""
    d = b.path("untar-%d" % r)
    os.mkdir(d)
    b.reset_stats()
    try:
        seconds = run(["tar", "-x", "--no-same-owner", "-f", ctx.data.tree_tar, "-C", d], timeout=ctx.cap)
        seconds += b.settle()
    except Timeout:
        return [capped_sample(ctx, b, count_local_files(d), ctx.data.files)]
    return [sample_of(b, seconds)]


def npm_one(ctx, b, r):
    """`cp -r` of the npm-like tree into a fresh directory, stopped at --cap
    like tar x (the share written is counted behind the mount)."""
    sub = "npm-%d" % r
    b.reset_stats()
    try:
        seconds = run(["cp", "-r", ctx.data.npm, b.path(sub)], timeout=ctx.cap)
        seconds += b.settle()
    except Timeout:
        return [capped_sample(ctx, b, b.count_files(sub), ctx.data.npm_files)]
    sample = sample_of(b, seconds)
    if r == 0:  # untimed: is everything on the other side?
        n = b.count_files(sub)
        if n != ctx.data.npm_files:
            sample.note = "%d of %d files behind the mount right after cp" % (n, ctx.data.npm_files)
    return [sample]


def rm_tree(ctx, b, r, key, total):
    """rm -rf of a tree written just before (untimed: tar x or cp -r, and
    settle), as a build's clean does: the removal and its settle are timed.
    A run longer than --cap is stopped and reported with an estimate from
    the share removed; a backend that cannot write the tree in 3 x --cap
    (sshfs at 20 ms, cp -r of the npm tree) gets no figure."""
    sub = "%s-%d" % (key, r)
    d = b.path(sub)
    try:
        if key == "rmrf":
            os.mkdir(d)
            run(["tar", "-x", "--no-same-owner", "-f", ctx.data.tree_tar, "-C", d],
                timeout=3 * ctx.cap)
        else:
            run(["cp", "-r", ctx.data.npm, d], timeout=3 * ctx.cap)
    except Timeout:
        run(["rm", "-rf", d], timeout=3600)
        raise Failed("its tree took over %ds to write, untimed" % (3 * ctx.cap))
    b.settle()
    b.reset_stats()
    try:
        seconds = run(["rm", "-rf", d], timeout=ctx.cap)
        seconds += b.settle()
    except Timeout:
        sample = capped_sample(ctx, b, total - count_local_files(d), total, "files removed")
        run(["rm", "-rf", d], timeout=3600)
        return sample
    sample = sample_of(b, seconds)
    if r == 0 and b.count_files(sub):  # untimed: gone on the other side?
        sample.note = "%d files still behind the mount after rm -rf" % b.count_files(sub)
    return sample


def rmrf_one(ctx, b, r):
    return [rm_tree(ctx, b, r, "rmrf", ctx.data.files)]


def rmrf_npm_one(ctx, b, r):
    return [rm_tree(ctx, b, r, "rmrf-npm", ctx.data.npm_files)]


def renames_one(ctx, b, r):
    """A rename storm: every file of the small-file tree, which the remote
    side made (put in behind the mount, a remount, then a walk: untimed),
    renamed one by one by rename(2) from this process, as mv in a loop or
    a refactoring tool does, until it is on the remote side. Stopped at
    --cap; the share done is the files renamed."""
    sub = "renames-%d" % r
    b.seed_tar(ctx.data.tree_tar, sub)
    b.remount()
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(b.path(sub)) for f in fs]
    b.settle()
    b.reset_stats()
    t0 = time.perf_counter()
    for done, f in enumerate(files):
        if time.perf_counter() - t0 > ctx.cap:
            return [capped_sample(ctx, b, done, len(files), "files renamed")]
        os.rename(f, f + ".moved")
    b.settle()
    sample = sample_of(b, time.perf_counter() - t0)
    if r == 0 and b.count_files(sub) != len(files):  # untimed: none lost
        sample.note = "%d of %d files behind the mount after the renames" % (b.count_files(sub), len(files))
    return [sample]


def rmrf_exec_one(ctx, b, r):
    """rm -rf of the small-file tree the remote side made, right after a
    remote command, as `mbexec npm install` then `rm -rf node_modules`
    does (untimed: the tree put in behind the mount, one remote `true`):
    the removal and its settle are timed."""
    sub = "rmrf-exec-%d" % r
    b.seed_tar(ctx.data.tree_tar, sub)
    argv, cwd, env = b.exec_true()
    run(argv, cwd=cwd, env=env)
    b.settle()
    b.reset_stats()
    d = b.path(sub)
    try:
        seconds = run(["rm", "-rf", d], timeout=ctx.cap)
        seconds += b.settle()
    except Timeout:
        sample = capped_sample(ctx, b, ctx.data.files - count_local_files(d), ctx.data.files,
                               "files removed")
        run(["rm", "-rf", d], timeout=3600)
        return [sample]
    sample = sample_of(b, seconds)
    if r == 0 and b.count_files(sub):  # untimed: gone on the other side?
        sample.note = "%d files still behind the mount after rm -rf" % b.count_files(sub)
    return [sample]


EDITRUN_ROUNDS = 10


def editrun_one(ctx, b, r):
    """The edit-run loop (issue 31): save a small file three directories
    down through the mount, then `cat` it remotely in that directory
    (mbexec with its cwd there; ssh with the exported path), checked; the
    figure is the mean of EDITRUN_ROUNDS rounds, after one untimed."""
    sub = "editrun-%d/a/b" % r
    d = b.path(sub)
    os.makedirs(d, exist_ok=True)
    f = os.path.join(d, "f.txt")
    if b.name == "sshfs":
        argv, cwd, env = b.command("cat", os.path.join(b.export, sub, "f.txt"))
    else:
        argv, cwd, env = b.command("cat", "f.txt")
        cwd = d

    def one(i):
        with open(f, "w") as fh:
            fh.write("round %d\n" % i)
        out = subprocess.run(argv, cwd=cwd, env=env, timeout=120, stdin=subprocess.DEVNULL,
                             capture_output=True).stdout
        if out != b"round %d\n" % i:
            raise Failed("round %d read %r" % (i, out[:40]))

    one(-1)
    b.settle()

    def loop():
        t0 = time.perf_counter()
        for i in range(EDITRUN_ROUNDS):
            one(i)
        return (time.perf_counter() - t0) / EDITRUN_ROUNDS
    smp = measure(b, loop)
    if smp.requests:
        smp.note = "%.1f requests a round" % (sum(smp.requests.values()) / EDITRUN_ROUNDS)
    return [smp]


GIT_IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0",
                "-c", "maintenance.auto=false", "-c", "commit.gpgSign=false"]


def git_env(ctx):
    return dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=ctx.data.dir)


def commit_one(ctx, b, r):
    """`git add -A && git commit` of the small-file tree in a fresh directory.
    Set-up, untimed: the tree goes in behind the mount, a remount, then
    `git init` through the mount. Stopped at --cap; the share done is the
    objects written (a blob per file, a tree per directory, the commit)."""
    sub = "commit-%d" % r
    b.seed_tar(ctx.data.tree_tar, sub)
    b.remount()
    d = b.path(sub)
    env = git_env(ctx)
    run(git_argv(d, "init", "-q", "--template=", "-b", "main"), env=env)
    trees = len(ctx.data.tree_dirs | {os.path.dirname(x) for x in ctx.data.tree_dirs}) + 1
    total = ctx.data.files + trees + 1
    b.reset_stats()
    t0 = time.perf_counter()
    try:
        run(git_argv(d, *GIT_IDENTITY, "add", "-A"), env=env, timeout=ctx.cap)
        left = ctx.cap - (time.perf_counter() - t0)
        if left <= 0:
            raise Timeout("add took the whole cap")
        run(git_argv(d, *GIT_IDENTITY, "commit", "-q", "-m", "bench"), env=env, timeout=left)
        b.settle()
    except Timeout:
        return [capped_sample(ctx, b, b.count_files(sub + "/.git/objects"), total, "objects written")]
    sample = sample_of(b, time.perf_counter() - t0)
    if r == 0:  # untimed: the commit holds every file (reads the index only)
        p = subprocess.run(git_argv(d, "ls-files"), env=env, capture_output=True, timeout=600)
        n = len(p.stdout.splitlines())
        if p.returncode or n != ctx.data.files:
            sample.note = "commit holds %d of %d files" % (n, ctx.data.files)
    return [sample]


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


def execio_one(ctx, b, r):
    """Bulk stdout, then bulk stdin, of one remote command; byte counts checked."""
    out = []
    for key, mib in (("stdout", ctx.stdout_mib), ("stdin", ctx.stdin_mib)):
        if key == "stdout":
            argv, cwd, env = b.command("head", "-c", "%dM" % mib, "/dev/zero")
            script = "%s | wc -c" % shlex.join(argv)
        else:
            argv, cwd, env = b.command("wc", "-c")
            script = "head -c %dM /dev/zero | %s" % (mib, shlex.join(argv))
        b.reset_stats()
        dt, text = run_output(["sh", "-c", script], cwd=cwd, env=env, timeout=1800)
        got = text.strip()
        out.append(sample_of(b, dt, None if got == str(mib * MIB) else
                             "%s: %s bytes, not %d" % (key, got[:40], mib * MIB)))
    return out


def conc_one(ctx, b, r):
    """--conc-count commands of `sleep 3` at once, timed until the last ends;
    then 4 of `sleep --long-sleep` started, and 2 s later one `true` and one
    small file write through the mount timed while they run."""
    def spawn(n, secs):
        argv, cwd, env = b.command("sleep", str(secs))
        return [subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for _ in range(n)]

    def reap(ps, timeout):
        errs = []
        deadline = time.monotonic() + timeout
        for p in ps:
            try:
                _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                errs.append("timed out")
                continue
            if p.returncode:
                errs.append("exit %d: %s" % (p.returncode, err.decode(errors="replace").strip()[:100]))
        return errs

    b.reset_stats()
    t0 = time.perf_counter()
    ps = spawn(ctx.conc_count, 3)
    errs = reap(ps, 300)
    many = sample_of(b, time.perf_counter() - t0,
                     "%d of %d failed: %s" % (len(errs), ctx.conc_count, errs[0]) if errs else None)

    b.reset_stats()
    ps = spawn(4, ctx.long_sleep)
    try:
        time.sleep(2)
        argv, cwd, env = b.command("true")
        t_true = run(argv, cwd=cwd, env=env, timeout=300)
        t0 = time.perf_counter()
        with open(b.path("conc-%d.txt" % r), "w") as f:
            f.write("hi\n")
        t_write = time.perf_counter() - t0
    finally:
        if b.name == "local":  # nothing left to measure: do not wait
            for p in ps:
                p.kill()
        errs = reap(ps, ctx.long_sleep + 300)
    note = None
    if errs and b.name != "local":
        note = "%d of 4 sleeps failed: %s" % (len(errs), errs[0])
    # Requests and peak of the whole window: 4 launches, their polls, true, the write.
    one = sample_of(b, t_true, note)
    write = Sample(t_write)
    write.peak = one.peak
    return [many, one, write]


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
    def __init__(self, name, keys, one, setup=None, backends=("local", "mbfs", "sshfs")):
        self.name, self.keys, self.one, self.setup, self.backends = name, keys, one, setup, backends


WORKLOADS = [
    Workload("seqwrite", ["seqwrite"], seqwrite_one, seqwrite_setup),
    Workload("seqread", ["seqread"], seqread_one, seqread_setup),
    Workload("raw", ["raw-get", "raw-put"], raw_one, raw_setup, backends=("mbfs",)),
    Workload("untar", ["untar"], untar_one),
    Workload("npm", ["npm"], npm_one),
    Workload("rmrf", ["rmrf"], rmrf_one),
    Workload("rmrfnpm", ["rmrf-npm"], rmrf_npm_one),
    Workload("rmrfexec", ["rmrf-exec"], rmrf_exec_one),
    Workload("renames", ["renames"], renames_one),
    Workload("ls", ["ls"], ls_one, tree_setup),
    Workload("find", ["find"], find_one, tree_setup),
    Workload("grep", ["grep-cold", "grep-warm"], grep_one, tree_setup),
    Workload("git", ["git-cold", "git-warm"], git_one, git_setup),
    Workload("commit", ["commit"], commit_one),
    Workload("exec", ["exec"], exec_one),
    Workload("editrun", ["editrun"], editrun_one),
    Workload("execio", ["exec-stdout", "exec-stdin"], execio_one),
    Workload("conc", ["conc-sleep", "conc-true", "conc-write"], conc_one),
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
        "commit": "git add -A && git commit, %d files" % d.files,
        "npm": "npm-like: cp -r of %d files of 1-4 KB" % d.npm_files,
        "rmrf": "rm -rf, %d small files in %d directories" % (d.files, len(d.tree_dirs) + d.files // 200 + 1),
        "rmrf-npm": "rm -rf of the npm-like tree, %d files in %d directories" % (d.npm_files, d.npm_dirs),
        "rmrf-exec": "rm -rf of %d small files the remote side made, right after a remote `true`" % d.files,
        "renames": "rename storm: rename(2) of each of %d small files the remote side made" % d.files,
        "exec": "%d x remote `true` (mbexec / ssh)" % ctx.exec_count,
        "editrun": "edit-run round: save a file 3 levels down, then remote `cat` of it "
                   "(mean of %d)" % EDITRUN_ROUNDS,
        "exec-stdout": "%d MiB of stdout: `X head -c %dM /dev/zero \\| wc -c`, X = mbexec / ssh"
                       % (ctx.stdout_mib, ctx.stdout_mib),
        "exec-stdin": "%d MiB of stdin: `head -c %dM /dev/zero \\| X wc -c`, X = mbexec / ssh"
                      % (ctx.stdin_mib, ctx.stdin_mib),
        "conc-sleep": "%d x `sleep 3` at once, until the last ends (mbexec / ssh)" % ctx.conc_count,
        "conc-true": "`true` while 4 x `sleep %d` run (mbexec / ssh)" % ctx.long_sleep,
        "conc-write": "small file write through the mount while 4 x `sleep %d` run" % ctx.long_sleep,
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


def cell(result, lat, key, who):
    """The runs of one cell, or a Failed, or None. The local side runs once
    (latency does not apply to it): its runs stand in every latency's rows."""
    if who == "local":
        for (l2, k2), row in sorted(result.rows.items(), key=lambda kv: kv[0][0] != lat):
            if k2 == key and "local" in row:
                return row["local"]
        return None
    return result.rows.get((lat, key), {}).get(who)


def med(result, lat, key, who):
    """(median seconds, capped) of a cell, or None."""
    v = cell(result, lat, key, who)
    if isinstance(v, list) and v:
        return median_seconds(v)
    return None


def ratio_text(a, b):
    if a is None or b is None or b[0] <= 0:
        return "—"
    return ("~%.1f" if a[1] or b[1] else "%.2f") % (a[0] / b[0])


BULK_MIB = {"seqwrite": "big", "seqread": "big", "raw-get": "big", "raw-put": "big",
            "exec-stdout": "stdout", "exec-stdin": "stdin"}


def bulk_mib(ctx, key):
    return {"big": ctx.data.big_mib, "stdout": ctx.stdout_mib, "stdin": ctx.stdin_mib}[BULK_MIB[key]]


NOISE = 1.05  # "no slower": a ratio up to this is noise on a shared machine


def target_rows(ctx, result):
    """Issue 9 and 11 targets next to this run's figures: (issue, target, figure, verdict)."""
    rows = []
    lats = ctx.latencies
    first = lats[0] if lats else 0

    def fig(x):
        return "—" if x is None else ("~%.2f s" if x[1] else "%.2f s") % x[0]

    def verdict(ok):
        return "—" if ok is None else ("met" if ok else "MISSED")

    def ratio_target(issue, text, a, b, limit):
        if a is None or b is None or b[0] <= 0:
            rows.append((issue, text, "—", "—"))
            return
        r = a[0] / b[0]
        rows.append((issue, text, "%s / %s = %s" % (fig(a), fig(b), ("~%.2f" if a[1] or b[1] else "%.2f") % r),
                     verdict(r <= limit)))

    def abs_target(issue, text, a, limit):
        rows.append((issue, text, fig(a), "—" if a is None else verdict(a[0] <= limit)))

    if 0 in lats:
        ratio_target("9", "%d MiB stdout at 0 ms: mbexec <= 1.5x ssh" % ctx.stdout_mib,
                     med(result, 0, "exec-stdout", "mbfs"), med(result, 0, "exec-stdout", "sshfs"), 1.5)
        ratio_target("9", "%d MiB stdin at 0 ms: mbexec <= 1.5x ssh" % ctx.stdin_mib,
                     med(result, 0, "exec-stdin", "mbfs"), med(result, 0, "exec-stdin", "sshfs"), 1.5)
        for lat in lats:
            if lat > 0:
                ratio_target("9", "%d MiB stdin at %d ms: mbexec <= 3x ssh at 0 ms" % (ctx.stdin_mib, lat),
                             med(result, lat, "exec-stdin", "mbfs"), med(result, 0, "exec-stdin", "sshfs"), 3)
    for lat in lats:
        if lat == 0:
            continue
        abs_target("11", "tar x %d files at %d ms: <= 2 s" % (ctx.data.files, lat), med(result, lat, "untar", "mbfs"), 2)
        abs_target("11", "git add + commit %d files at %d ms: <= 3 s" % (ctx.data.files, lat),
                   med(result, lat, "commit", "mbfs"), 3)
        abs_target("11", "cold grep -r %d files at %d ms: <= 3 s" % (ctx.data.files, lat),
                   med(result, lat, "grep-cold", "mbfs"), 3)
    if 0 in lats:
        for lat in lats:
            for key, what in (("rmrf-exec", "rm -rf after a command"), ("renames", "rename storm")):
                if lat:
                    ratio_target("30", "%s at %d ms: mbfs <= %dx sshfs at 0 ms" % (what, lat, 1 if lat <= 20 else 2),
                                 med(result, lat, key, "mbfs"), med(result, 0, key, "sshfs"),
                                 1 if lat <= 20 else 2)
        for lat in lats:
            abs_target("31", "edit-run round at %d ms: <= 3 round trips + 30 ms" % lat,
                       med(result, lat, "editrun", "mbfs"), (3 * lat + 30) / 1000.0)
        ratio_target("11", "git add + commit at 0 ms: mbfs <= sshfs",
                     med(result, 0, "commit", "mbfs"), med(result, 0, "commit", "sshfs"), 1)
    for lat in lats:
        for key, raw, what in (("seqread", "raw-get", "read"), ("seqwrite", "raw-put", "write")):
            m, r = med(result, lat, key, "mbfs"), med(result, lat, raw, "mbfs")
            if m is None or r is None:
                rows.append(("11", "%d MiB %s at %d ms: >= 0.8 of raw" % (ctx.data.big_mib, what, lat), "—", "—"))
                continue
            share = r[0] / m[0]
            rows.append(("11", "%d MiB %s at %d ms: >= 0.8 of raw" % (ctx.data.big_mib, what, lat),
                         "%.0f / %.0f MiB/s = %.2f" % (ctx.data.big_mib / m[0], ctx.data.big_mib / r[0], share),
                         verdict(share >= 0.8)))
    for lat in lats:
        for key, what in (("git-warm", "warm git status"), ("grep-warm", "warm grep -r")):
            ratio_target("11", "%s at %d ms: mbfs <= 2x local" % (what, lat),
                         med(result, lat, key, "mbfs"), med(result, lat, key, "local"), 2)
    if first == 0:
        slower, compared = [], 0
        for (lat, key) in result.order:
            if lat != 0 or key.startswith("raw"):
                continue
            m, sh = med(result, 0, key, "mbfs"), med(result, 0, key, "sshfs")
            if m is None or sh is None or sh[0] <= 0:
                continue
            compared += 1
            if m[0] > sh[0] * NOISE:
                slower.append("%s %.2fx" % (key, m[0] / sh[0]))
        rows.append(("11", "every workload at 0 ms: mbfs/mbexec no slower than sshfs/ssh (%d %% counts as noise)"
                     % round(100 * (NOISE - 1)),
                     ("slower: " + ", ".join(slower)) if slower else "%d of %d no slower" % (compared, compared),
                     verdict(not slower) if compared else "—"))
    return rows


def build_report(ctx, result, started, partial=False):
    lines = []
    commit, dirty = ctx.commit, ctx.dirty
    sshfs_ver = "—"
    if ctx.sshd:
        p = subprocess.run(["sshfs", "--version"], capture_output=True, text=True)
        m = re.search(r"SSHFS version (\S+)", p.stdout + p.stderr)
        sshfs_ver = "sshfs " + (m.group(1) if m else "?")
    lines.append("## Benchmark results%s%s" % (" (quick run)" if ctx.quick else "",
                                                ", INTERRUPTED: partial" if partial else ""))
    lines.append("")
    lines.append("`tests/bench/bench.py%s` on %s, commit %s%s, %d CPUs, %s. "
                 "Seconds, median of up to %d runs (no further run of a workload once its runs took %g s; "
                 "the runs column says how many, local/mbfs/sshfs), lower is better; a `tar x`, `cp -r` or "
                 "`git add + commit` run is stopped after %g s and shown as >%g (~estimate from the share "
                 "done). "
                 "local: a directory on the local disk (%s), run once, its figures repeated at every "
                 "latency; its cold runs drop the page cache of the directory's files only. "
                 "mbfs: the local service (`tests/localservice.py --latency-ms L`); mbexec with its cwd in "
                 "the mount. "
                 "sshfs: %s with default options, on a private sshd over loopback, "
                 "through `tests/bench/delayproxy.py` adding L ms per round trip when L > 0; ssh to the "
                 "same sshd the same way. "
                 "mbfs requests: API requests of one mbfs run, from `/_local/stats`."
                 % (" " + " ".join(ctx.argv) if ctx.argv else "", time.strftime("%Y-%m-%d"), commit or "?",
                    " with uncommitted changes to %d files" % dirty if dirty else "", os.cpu_count(), platform_name(), ctx.repeat,
                    ctx.budget, ctx.cap, ctx.cap, getattr(ctx, "local_fstype", "?"), sshfs_ver))
    lines.append("")
    lines.append("| latency | workload | local s | mbfs s | sshfs s | mbfs/sshfs | mbfs/local | mbfs requests | runs | notes |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    details = []
    for (lat, key) in result.order:
        loc, m, s = cell(result, lat, key, "local"), cell(result, lat, key, "mbfs"), cell(result, lat, key, "sshfs")
        mm, sm, lm = med(result, lat, key, "mbfs"), med(result, lat, key, "sshfs"), med(result, lat, key, "local")
        req = median_requests(m)
        notes = []
        for v, who in ((loc, "local"), (m, "mbfs"), (s, "sshfs")):
            if isinstance(v, Failed):
                notes.append("%s: %s" % (who, str(v).replace("|", "/")))
            elif isinstance(v, list):
                notes += ["%s: %s" % (who, x.note.replace("|", "/")) for x in v if x.note]
        exec_names = key.startswith("exec") or key in ("conc-sleep", "conc-true")
        names = {"local": "local", "mbfs": "mbexec" if exec_names else "mbfs", "sshfs": "ssh" if exec_names else "sshfs"}
        if key in BULK_MIB:
            for v, who in ((loc, "local"), (m, "mbfs"), (s, "sshfs")):
                if isinstance(v, list) and v:
                    notes.append("%s %.0f MiB/s" % (names[who], bulk_mib(ctx, key) / statistics.median(x.seconds for x in v)))
        if key == "exec":
            for v, who in ((m, "mbfs"), (s, "sshfs")):
                if isinstance(v, list) and v:
                    notes.append("%s %.0f ms/call" % (names[who], 1000 * statistics.median(x.seconds for x in v) / ctx.exec_count))
        if key == "exec-stdout" and lat == 0:
            notes.append("target: mbexec <= 1.5x ssh")
        if key == "exec-stdin":
            if lat == 0:
                notes.append("target: mbexec <= 1.5x ssh")
            else:
                notes.append("mbexec / ssh at 0 ms: %s (target <= 3)" % ratio_text(mm, med(result, 0, key, "sshfs")))
        if isinstance(m, list) and m and m[0].peak is not None and (key.startswith(("exec-", "conc-"))):
            notes.append("peak ops %d" % max(x.peak for x in m))
        if key == "conc-true" and req is not None:
            notes.append("requests: the whole window of the 4 sleeps")
        if isinstance(m, list) and any(x.throttled for x in m):
            notes.append("429s: %s" % "/".join(str(x.throttled) for x in m))
        runs = "/".join(str(len(v)) if isinstance(v, list) else "0" for v in (loc, m, s) if v is not None)
        lines.append("| %d ms | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            lat, label(ctx, key), fmt_seconds(loc), fmt_seconds(m), fmt_seconds(s), ratio_text(mm, sm),
            ratio_text(mm, lm), "—" if req is None else "%g" % req, runs, "; ".join(notes)))
        if isinstance(m, list) and m and m[0].requests:
            routes = {}
            for x in m:
                for k2, n in x.requests.items():
                    routes[k2] = routes.get(k2, 0) + n
            top = sorted(routes.items(), key=lambda kv: -kv[1])
            peak = max((x.peak or 0) for x in m)
            details.append("| %d ms | %s | %s | %d |" % (lat, label(ctx, key), ", ".join(
                "%s %g" % (k2, round(n / len(m), 1)) for k2, n in top[:6]), peak))

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

    targets = target_rows(ctx, result)
    if targets:
        lines.append("")
        lines.append("### Targets of issues 9 and 11")
        lines.append("")
        if ctx.quick:
            lines.append("Quick run: smaller sizes than the targets were set for, so the figures only show "
                         "that the rows work.")
            lines.append("")
        lines.append("| issue | target | this run | |")
        lines.append("|---:|---|---|---|")
        for t in targets:
            lines.append("| %s | %s | %s | %s |" % t)
    if details:
        lines.append("")
        lines.append("### mbfs requests per run, by route")
        lines.append("")
        lines.append("Peak ops: the service's `peakConcurrentOps` for the container (its limit is 4).")
        lines.append("")
        lines.append("| latency | workload | requests per run | peak ops |")
        lines.append("|---:|---|---|---:|")
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


def snapshot_programs(ctx):
    """Copy mbfs, mbexec and the local service into the scratch directory and
    run those copies: a rebuild or an edit in the tree during the run (other
    work on the same checkout) must not change what is measured half-way."""
    snap = os.path.join(ctx.tmp, "programs")
    for src, dst in ((mbtest.MBFS, "fuse/mbfs"), (mbtest.MBEXEC, "shim/mbexec")):
        if os.path.exists(src):
            os.makedirs(os.path.join(snap, os.path.dirname(dst)), exist_ok=True)
            shutil.copy2(src, os.path.join(snap, dst))
    svc_dir = os.path.dirname(mbtest.SERVICE)
    os.makedirs(os.path.join(snap, "tests"))
    shutil.copy2(mbtest.SERVICE, os.path.join(snap, "tests", os.path.basename(mbtest.SERVICE)))
    shutil.copytree(os.path.join(svc_dir, "mbsvc"), os.path.join(snap, "tests", "mbsvc"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    mbtest.MBFS = os.path.join(snap, "fuse", "mbfs")
    mbtest.MBEXEC = os.path.join(snap, "shim", "mbexec")
    mbtest.SERVICE = os.path.join(snap, "tests", os.path.basename(mbtest.SERVICE))
    log("running copies of mbfs, mbexec and the local service in %s" % snap)


def run_latency(ctx, names, latency, result):
    """Both sides mounted at once; each workload runs on one, then the other,
    so a time limit cuts both at the same place."""
    started = []
    try:
        for name in names:
            if name == "local" and latency != ctx.latencies[0]:
                continue  # latency does not apply: once is enough
            cls = {"local": LocalBackend, "mbfs": MbfsBackend, "sshfs": SshfsBackend}[name]
            try:
                started.append(cls(ctx, latency))
                if name == "local":
                    ctx.local_fstype = started[-1].fstype
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
    ap.add_argument("--backends", default="local,mbfs,sshfs", help="local,mbfs,sshfs (default all three)")
    ap.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS), help="subset of " + ",".join(w.name for w in WORKLOADS))
    ap.add_argument("--size-mib", type=int, help="size of the sequential file (default 64, quick 8)")
    ap.add_argument("--files", type=int, help="small files in the tar (default 2000, quick 200)")
    ap.add_argument("--repo-files", type=int, help="files in the git repository (default 1000, quick 100)")
    ap.add_argument("--exec-count", type=int, help="remote `true` calls per run (default 50, quick 10)")
    ap.add_argument("--npm-files", type=int, help="files in the npm-like tree (default 10000, quick 1000)")
    ap.add_argument("--stdout-mib", type=int, help="MiB of remote stdout (default 200, quick 20)")
    ap.add_argument("--stdin-mib", type=int, help="MiB of remote stdin (default 100, quick 10)")
    ap.add_argument("--conc-count", type=int, default=10, help="concurrent `sleep 3` commands (default 10)")
    ap.add_argument("--long-sleep", type=int, default=15,
                    help="seconds of the 4 commands running while `true` and a write are timed (default 15)")
    ap.add_argument("--mbfs-opt", action="append", default=[], help="extra -o option for mbfs")
    ap.add_argument("--sshfs-opt", action="append", default=[], help="extra -o option for sshfs")
    ap.add_argument("--cap", type=float, help="stop a tar x run after this many seconds and extrapolate "
                    "(default 120, quick 60)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-results.md"))
    ap.add_argument("--max-minutes", type=float, default=90, help="skip what remains after this long (default 90)")
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
    if set(backends) - {"local", "mbfs", "sshfs"}:
        ap.error("unknown backends: %s" % ", ".join(sorted(set(backends) - {"local", "mbfs", "sshfs"})))
    ctx.exec_count = args.exec_count or (10 if args.quick else 50)
    ctx.stdout_mib = args.stdout_mib or (20 if args.quick else 200)
    ctx.stdin_mib = args.stdin_mib or (10 if args.quick else 100)
    ctx.conc_count = args.conc_count
    ctx.long_sleep = args.long_sleep
    if ctx.long_sleep < 5:
        ap.error("--long-sleep must be at least 5 (true and the write are timed 2 s after the start)")
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
    # The commit measured is the one at the start (the tree may move during the run).
    ctx.commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True).stdout.splitlines()
    # Edits to the harness itself do not change what is measured.
    ctx.dirty = len([x for x in changed if not x[3:].startswith("tests/bench/")])
    try:
        snapshot_programs(ctx)
        ctx.data = Data(ctx.tmp, args.size_mib or (8 if args.quick else 64),
                        args.files or (200 if args.quick else 2000),
                        args.repo_files or (100 if args.quick else 1000),
                        args.npm_files or (1000 if args.quick else 10000))
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
