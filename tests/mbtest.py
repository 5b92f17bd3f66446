"""Helpers shared by the mbfs and mbexec test suites.

Starts the local Mainbrella service, talks to its API with urllib, mounts
mbfs and always unmounts. Tests drive the real binaries (fuse/mbfs,
shim/mbexec) found in $MB_BIN_DIR (default: the repository root).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import runguard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN_DIR = os.environ.get("MB_BIN_DIR", ROOT)
MBFS = os.path.join(BIN_DIR, "fuse", "mbfs")
MBEXEC = os.path.join(BIN_DIR, "shim", "mbexec")
SERVICE = os.path.join(ROOT, "tests", "localservice.py")
PYTHON = "/usr/bin/python3"
ASAN = os.environ.get("MB_ASAN") == "1"

SANITIZER_RE = re.compile(r"(ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer)")


def tmp_base():
    """Where a test makes its mountpoints, services and caches: its pytest
    process's scope in the run's directory (runguard.py), which the run
    ends whatever happens to pytest."""
    return os.environ.get("MB_TEST_TMP", "/var/tmp")


def freeze(pid):
    """SIGSTOP pid, registered first with the run guard: if pytest dies
    before thaw(), the guard continues and ends it (a stopped daemon
    under a mount hangs whatever touches the mount)."""
    runguard.register(os.environ.get(runguard.SCOPE_ENV) or tmp_base(), pid)
    os.kill(pid, signal.SIGSTOP)


def thaw(pid):
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def fuse_available():
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


class Service:
    """A running local service on a free port, with its own state dir."""

    def __init__(self, latency_ms=0, extra_args=()):
        self.tmp = tempfile.mkdtemp(prefix="mbsvc-", dir=tmp_base())
        self.key = "mb_" + uuid.uuid4().hex + uuid.uuid4().hex
        self.log_path = os.path.join(self.tmp, "service.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ, MAINBRELLA_API_KEY=self.key)
        args = [PYTHON, SERVICE, "--listen", "127.0.0.1:0", "--state",
                os.path.join(self.tmp, "state")]
        if latency_ms:
            args += ["--latency-ms", str(latency_ms)]
        args += list(extra_args)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, env=env)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"listening (http://\S+)", line)
        if not m:
            self.stop()
            raise RuntimeError("local service did not start: %r; log: %s" % (line, self.log()))
        self.url = m.group(1)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def env(self, **extra):
        """Environment for mbfs/mbexec: key via the environment, never argv."""
        e = dict(os.environ)
        e.update(MAINBRELLA_API_URL=self.url, MAINBRELLA_API_KEY=self.key)
        e.pop("MAINBRELLA_API_KEY_FILE", None)
        if ASAN:
            e.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
        e.update(extra)
        return e

    def request(self, method, route, query=None, body=None, headers=None, raw=False, timeout=130):
        url = self.url + route
        if query:
            url += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        data = None
        hdrs = {"Authorization": "Bearer " + self.key}
        if body is not None:
            if isinstance(body, (bytes, bytearray)):
                data = bytes(body)
                hdrs["Content-Type"] = "application/octet-stream"
            else:
                data = json.dumps(body).encode()
                hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                payload = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            payload = e.read()
            status = e.code
        if raw:
            return status, payload
        try:
            return status, json.loads(payload.decode() or "null")
        except ValueError:
            return status, payload

    def create_container(self, workspace=True):
        """A default (node) container. The node image has no /workspace:
        with workspace, it is created, as Mastra's adapter and mbfs do."""
        status, doc = self.request("POST", "/containers", body={},
                                   headers={"Idempotency-Key": uuid.uuid4().hex})
        assert status == 200, (status, doc)
        c = doc["creation"]
        ident = {"id": c["containerId"], "createdAt": c["createdAt"]}
        if workspace:
            status, doc = self.request("POST", "/containers/files/mkdir", query=self.ident_query(ident),
                                       body={"path": "/workspace", "recursive": True, "mode": "0755"})
            assert status == 200, (status, doc)
        return ident

    def delete_container(self, ident):
        self.request("DELETE", "/containers", query=ident)

    def ident_query(self, ident, **kw):
        q = {"id": ident["id"], "createdAt": ident["createdAt"]}
        q.update(kw)
        return q

    def exec(self, ident, command, timeout_ms=30000):
        """Run command on the sandbox; its answer. Sent again while the
        sandbox's 4 operations are taken (429 execution_limit), as mbfs and
        mbexec do: a mount's read-ahead or batches may hold them a moment."""
        deadline = time.monotonic() + 30
        while True:
            status, doc = self.request("POST", "/containers/exec", query=self.ident_query(ident),
                                       body={"command": command, "timeoutMs": timeout_ms})
            busy = status == 429 and isinstance(doc, dict) and doc.get("error") == "execution_limit"
            if not busy or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 200, (status, doc)
        return doc

    def put_file(self, ident, path, data):
        status, doc = self.request("PUT", "/containers/files", query=self.ident_query(ident, path=path), body=data)
        assert status == 200, (status, doc)

    def get_file(self, ident, path):
        status, data = self.request("GET", "/containers/files", query=self.ident_query(ident, path=path), raw=True)
        return status, data

    def stats(self, commands=False):
        """The service's counts; with commands, the heads of the exec
        commands run since the last reset too."""
        status, doc = self.request("GET", "/_local/stats", query={"commands": "1"} if commands else None)
        assert status == 200, (status, doc)
        return doc

    def reset_stats(self):
        self.request("DELETE", "/_local/stats")

    def fault(self, **rule):
        status, doc = self.request("POST", "/_local/faults", body=rule)
        assert status == 200, (status, doc)

    def clear_faults(self):
        self.request("DELETE", "/_local/faults")

    def held(self):
        """How many answers a heldMs fault holds now."""
        status, doc = self.request("GET", "/_local/faults")
        assert status == 200, (status, doc)
        return doc["held"]

    def release_held(self):
        """Let go the answers a heldMs fault holds (and no other rule).
        Not asked of a service that is gone or frozen (it would not
        answer)."""
        if self.proc.poll() is not None or runguard.stopped_or_gone(self.proc.pid):
            return
        try:
            self.request("POST", "/_local/faults/release", timeout=10)
        except OSError:
            pass

    def expire(self, ident):
        status, doc = self.request("POST", "/_local/expire", query=ident)
        assert status == 200, (status, doc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def requests_for(stats, route):
    return stats.get("requests", {}).get(route, 0)


def guest_listings(stats):
    """How many exec requests of stats (service.stats(commands=True)) were
    mbfs's guest listings (follow.sh: a cold directory, the relist after a
    command, what a running command's mount follows), told by a line only
    that script has."""
    return sum(1 for c in stats["execCommands"] if "\necho @\n" in c)


def read_pty_to_end(master, timeout=60):
    """What is left on a pty's master side once every slave fd is closed
    (the program ended, the test closed its own): the kernel moves the last
    writes over in a worker, late on a busy machine, and the master reads
    them all before it says EIO."""
    import select
    out = b""
    deadline = time.monotonic() + timeout
    while select.select([master], [], [], max(0, deadline - time.monotonic()))[0]:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    return out


def sanitizer_report(text):
    return SANITIZER_RE.search(text or "") is not None


FUSECTL = "/sys/fs/fuse/connections"


def _mount_device(mountpoint):
    """major:minor of the mount at mountpoint, read from mountinfo (a stat
    of a stopped daemon's mount would hang); None when not mounted."""
    want = os.path.realpath(mountpoint)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and fields[4].encode().decode("unicode_escape") == want:
                found = fields[2]
    return found


def settle_kernel_queue(mountpoint, limit=3.0):
    """Wait until the kernel has handed every request it queued for this
    mount to the daemon. A close(2) sends RELEASE in the background, and an
    unmount drops what the daemon has not read yet, so libfuse never frees
    that handle: harmless at exit, but a leak report under ASan. The
    connection's `waiting` count (fusectl, mounted here when missing) is the
    event; without fusectl nothing is waited for."""
    try:
        dev = _mount_device(mountpoint)
        if dev is None:
            return
        if _mount_device(FUSECTL) is None:
            subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL], capture_output=True)
    except OSError:
        return
    # the kernel names a connection by its own dev_t: major << 20 | minor
    major, minor = (int(x) for x in dev.split(":"))
    path = os.path.join(FUSECTL, str(major << 20 | minor), "waiting")
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            with open(path) as f:
                if int(f.read().strip() or "0") == 0:
                    return
        except (OSError, ValueError):
            return
        time.sleep(0.02)


def fusermount_u(mountpoint, timeout=30):
    """`fusermount3 -u`, as a user retries it: right after a close(2) the
    kernel may still hold the mount busy for the RELEASE it sends in the
    background, so the queue is let settle first and a busy answer tried
    again. Whether it is unmounted now."""
    settle_kernel_queue(mountpoint)
    deadline = time.time() + timeout
    while True:
        subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True)
        if not os.path.ismount(mountpoint) or time.time() >= deadline:
            return not os.path.ismount(mountpoint)
        time.sleep(0.1)


class Mount:
    """mbfs running in the foreground (-f) on a fresh mountpoint."""

    def __init__(self, service, ident, remote="/workspace", options=(), mountpoint=None, writeback=None,
                 nofile=None, wrap=()):
        """writeback: small files closed are queued and sent in batches, the
        default of mbfs, so the default here too: a test that reads the
        sandbox after close() syncs first, as a user would.
        writeback=False (or options=["sync_close"]) mounts with -o sync_close,
        where close() uploads and reports the upload's error.
        MB_TEST_SYNC_CLOSE=1 runs the tests that do not ask for either with
        -o sync_close. nofile: (soft, hard) limit of open files mbfs starts
        with. wrap: a command that runs mbfs as its child (strace), argv
        before mbfs's own."""
        if writeback is None:
            writeback = "sync_close" not in options and os.environ.get("MB_TEST_SYNC_CLOSE") != "1"
        if not writeback and "sync_close" not in options:
            options = list(options) + ["sync_close"]
        # a cache directory of its own unless the test shares one on purpose:
        # what a mount leaves in its journal (an unmount while batches could
        # not land) is replayed by the next mount of that cache, and must
        # not turn up in another test's mount
        if not any(o.startswith("cache_dir=") for o in options):
            options = list(options) + ["cache_dir=" + tempfile.mkdtemp(prefix="cache-", dir=service.tmp)]
        self.service = service
        self.ident = ident
        self.owns_dir = mountpoint is None
        self.mountpoint = mountpoint or tempfile.mkdtemp(prefix="mbfs-mnt-", dir=tmp_base())
        self.log_path = os.path.join(service.tmp, "mbfs-%d.log" % time.monotonic_ns())
        self._log = open(self.log_path, "wb")
        spec = "%s@%s:%s" % (ident["id"], ident["createdAt"], remote)
        args = [MBFS, "-f", spec, self.mountpoint]
        for o in options:
            args += ["-o", o]
        if nofile:      # util-linux's prlimit sets them, then execs mbfs (same pid)
            args = ["prlimit", "--nofile=%d:%d" % nofile, "--"] + args
        args = list(wrap) + args
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=service.env())
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.path.ismount(self.mountpoint) and os.path.exists(os.path.join(self.mountpoint, ".mainbrella")):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        log = self.log()
        self.unmount()
        raise RuntimeError("mbfs did not mount: %s" % log)

    def kill9(self):
        """kill -9 the daemon, then detach its dead mount (as a user would);
        its log."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        subprocess.run(["fusermount3", "-uz", self.mountpoint], capture_output=True)
        self.unmount()
        return self.log()

    def path(self, *parts):
        return os.path.join(self.mountpoint, *parts)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def unmount(self):
        if self.proc.poll() is None:
            self.service.release_held()
        if os.path.ismount(self.mountpoint) and not fusermount_u(self.mountpoint):
            subprocess.run(["fusermount3", "-uz", self.mountpoint], capture_output=True)
        if self.proc.poll() is None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.owns_dir:
            try:
                os.rmdir(self.mountpoint)
            except OSError:
                pass
        return self.proc.returncode

    def check_clean_log(self):
        log = self.log()
        assert not sanitizer_report(log), log


def run_mbexec(service, args, cwd=None, input=None, timeout=120, env=None, **kw):
    service.release_held()      # mbexec sends what is queued first
    e = service.env()
    if env:
        e.update(env)
    return subprocess.run([MBEXEC] + list(args), cwd=cwd, input=input, capture_output=True,
                          timeout=timeout, env=e, **kw)
