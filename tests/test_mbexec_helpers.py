"""Helpers shared by the tests/test_mbexec_*.py suites (no tests here)."""
import contextlib
import fcntl
import hashlib
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time
import uuid

import pytest

import mbtest

MiB = 1048576


def unique(prefix="t"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def sha(data):
    return hashlib.sha256(data).hexdigest()


def mbx(service, args, cwd, input=None, timeout=120, env=None):
    """Run mbexec; stdin is /dev/null unless input is given."""
    kw = {} if input is not None else {"stdin": subprocess.DEVNULL}
    p = mbtest.run_mbexec(service, args, cwd=cwd, input=input, timeout=timeout, env=env, **kw)
    assert not mbtest.sanitizer_report(p.stderr.decode(errors="replace")), p.stderr
    return p


def popen(service, args, cwd, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("env", service.env())
    return subprocess.Popen([mbtest.MBEXEC] + list(args), cwd=cwd, **kw)


def sh(service, ident, cmd):
    """Run cmd on the sandbox through the API; assert exit 0; return stdout."""
    doc = service.exec(ident, cmd)
    assert doc["exitCode"] == 0, doc
    return doc["stdout"]


def remote_procs(service, ident, pattern):
    """Guest processes whose command line matches pattern (pgrep -f)."""
    doc = service.exec(ident, "pgrep -af -- '%s' | grep -v pgrep || true" % pattern)
    return doc["stdout"].strip()


def wait_remote_gone(service, ident, pattern, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not remote_procs(service, ident, pattern):
            return True
        time.sleep(0.2)
    return False


def requests(service, route):
    return mbtest.requests_for(service.stats(), route)


def jobs_created(service):
    return sum(service.stats().get("jobsCreated", {}).values())


def fake_mount(service, ident, root="/workspace", api_url=None):
    """A plain directory with a hand-written control file (no FUSE). The
    remote root is created first, as mbfs does for /workspace (the default
    image has none)."""
    status, doc = service.request("POST", "/containers/files/mkdir", query=service.ident_query(ident),
                                  body={"path": root, "recursive": True, "mode": "0755"})
    assert status == 200, (status, doc)
    d = tempfile.mkdtemp(prefix="mbx-fake-", dir=service.tmp)  # removed with the service
    with open(os.path.join(d, ".mainbrella"), "w") as f:
        json.dump({"apiUrl": api_url or service.url, "id": ident["id"],
                   "createdAt": ident["createdAt"], "root": root, "mountpoint": d,
                   "pid": os.getpid(), "version": "0.1.0"}, f)
    return d


def module_mount(service, container):
    """Generator body for a module-scoped mount fixture."""
    if not mbtest.fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")
    m = mbtest.Mount(service, container)
    try:
        yield m
    finally:
        rc = m.unmount()
        log = m.log()
        assert not mbtest.sanitizer_report(log), log
        assert rc == 0, "mbfs exited %s: %s" % (rc, log[-3000:])


def rmtree(d):
    shutil.rmtree(d, ignore_errors=True)


def run_in_pty(service, args, cwd, rows=33, cols=101, keys=(), timeout=60, env=None):
    """Run mbexec on a fresh pty of the given size; returns (status, output,
    terminal attributes before, after). env: variables to set (a value of
    None unsets one)."""
    e = service.env()
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    before = termios.tcgetattr(slave)
    p = subprocess.Popen([mbtest.MBEXEC] + list(args), cwd=cwd, env=e,
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    out = b""
    deadline = time.time() + timeout
    keys = list(keys)
    try:
        while time.time() < deadline and p.poll() is None:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                out += data
            if keys and keys[0][0] in out:
                os.write(master, keys.pop(0)[1])
        status = p.wait(timeout=max(1, deadline - time.time()))
        after = termios.tcgetattr(slave)
        # what mbexec wrote last may still be on its way to the master
        os.close(slave)
        slave = None
        out += mbtest.read_pty_to_end(master, max(1, deadline - time.time()))
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
        if slave is not None:
            os.close(slave)
    return status, out, before, after


# ---- a service that stops answering (SIGSTOP) ----

# fixtures of test_mbexec_lost*.py, which import them by name
@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


@pytest.fixture(params=["mount", "direct"])
def where(request, service, container, mnt):
    """The mount's directory (polls through its socket), or a plain
    directory with a control file (mbexec polls by itself)."""
    if request.param == "mount":
        yield mnt.mountpoint
    else:
        d = fake_mount(service, container)
        yield d
        rmtree(d)



ATTACH_RE = re.compile(rb"mbexec --attach ([0-9a-f]{16})")


@contextlib.contextmanager
def frozen(service):
    mbtest.freeze(service.proc.pid)
    try:
        yield
    finally:
        mbtest.thaw(service.proc.pid)


def read_until(f, needle, timeout):
    """Bytes read from f until needle is among them, f ends, or timeout."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([f], [], [], left)[0]:
            break
        chunk = os.read(f.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
    return buf


def started(service, cwd, script, env=None):
    p = popen(service, ["sh", "-c", script], cwd, env=service.env(**(env or {})))
    assert read_until(p.stdout, b"started\n", 60) == b"started\n", p.stderr.read()
    return p
