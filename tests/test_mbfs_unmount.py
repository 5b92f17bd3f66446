"""An unmount a user can trust: `mbfs -u` puts everything on the sandbox
before it unmounts and says what it could not (still mounted while the
sandbox does not answer); after a plain `fusermount3 -u`, what the daemon
could not send is told at the next contact: the next mount, `mbfs
--status` (with or without a mount) and mbexec, once."""
import hashlib
import json
import os
import pty
import re
import signal
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import control, hold_writeback, sh, unique, write_file

pytestmark = pytest.mark.usefixtures("no_faults_left")

PUT = "PUT /containers/files"


def umount(m, *args):
    """`mbfs -u [ARGS] MOUNTPOINT`, its CompletedProcess."""
    m.service.release_held()
    return subprocess.run([mbtest.MBFS, "-u"] + list(args) + [m.mountpoint],
                          capture_output=True, text=True, timeout=300)


def status_of(arg, *args):
    return subprocess.run([mbtest.MBFS, "--status"] + list(args) + [arg],
                          capture_output=True, text=True, timeout=120)


def daemon_ended(m):
    """The daemon of m has exited already (mbfs -u waited for it): its
    exit status, now, without waiting."""
    return m.proc.poll()


def done(m):
    """Unmount m if still mounted; its daemon's log has no sanitizer report."""
    m.unmount()
    assert not mbtest.sanitizer_report(m.log()), m.log()


def kept_files(cache):
    return [os.path.join(p, f) for p, _, fs in os.walk(os.path.join(cache, "kept")) for f in fs]


def mount_with_cache(service, container, tmp_path, *opts):
    cache = str(tmp_path / "cache")
    return mbtest.Mount(service, container, writeback=True,
                        options=["cache_dir=" + cache] + list(opts)), cache


def refuse_uploads(service):
    """The sandbox refuses every upload for good: files go under kept/."""
    service.fault(route=PUT, count=100000, status=403, error="file_access_denied")


def fail_uploads(service):
    """The service fails every upload with a 503: the mount keeps
    retrying, nothing is kept."""
    service.fault(route=PUT, count=100000, status=503, error="files_unavailable")


def test_u_sends_2000_pending_files_then_unmounts(service, container, need_fuse):
    # the held batch may wait for minutes: 2,000 files behind it under ASan
    m = mbtest.Mount(service, container, writeback=True, options=["op_timeout=600"])
    name = unique("u2000")
    try:
        d = m.path(name)
        os.mkdir(d)
        # one batch held in flight: the 2,000 files wait behind it
        hold_writeback(service, m, d, held_ms=500000)
        for i in range(2000):
            write_file(os.path.join(d, "f%04d" % i), b"file %d\n" % i)
        assert control(m)["writeback"]["pendingFiles"] >= 2000
        r = umount(m)
        assert r.returncode == 0, r
        assert r.stderr == "", r.stderr   # not a terminal: silent
        assert not os.path.ismount(m.mountpoint)
        assert daemon_ended(m) == 0, m.log()[-3000:]
    finally:
        done(m)
    assert not mbtest.sanitizer_report(m.log()), m.log()
    out = sh(service, container, "cd /workspace/%s && ls | wc -l && cat f* | sha256sum" % name)
    want = hashlib.sha256(b"".join(b"file %d\n" % i for i in range(2000))).hexdigest()
    assert out == "2001\n%s  -\n" % want, out


def test_u_shows_progress_on_a_terminal_only(service, container, need_fuse):
    m = mbtest.Mount(service, container, writeback=True)
    master, slave = pty.openpty()
    try:
        d = m.path(unique("uprogress"))
        os.mkdir(d)
        hold_writeback(service, m, d)   # the next batch waits behind it
        for i in range(50):
            write_file(os.path.join(d, "p%d" % i), b"p\n")
        p = subprocess.Popen([mbtest.MBFS, "-u", m.mountpoint], stdout=subprocess.PIPE,
                             stderr=slave, text=True)
        os.close(slave)
        slave = None
        seen = b""
        while True:
            if b"left to send" in seen:
                service.release_held()      # shown: now the batch may go
            try:
                chunk = os.read(master, 4096)
            except OSError:   # EIO: mbfs -u ended, the pty has no writer
                break
            if not chunk:
                break
            seen += chunk
        assert p.wait(120) == 0, seen
        assert seen.startswith(b"\runmount: ") and b"left to send" in seen, seen
        # erased at the end: nothing else said
        assert seen.endswith(b"\r") and b"\n" not in seen, seen
        assert daemon_ended(m) == 0, m.log()[-3000:]
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
        done(m)


def test_u_waits_while_uploads_fail_then_keeps_the_mount(service, container, need_fuse, tmp_path):
    m, cache = mount_with_cache(service, container, tmp_path, "op_timeout=2")
    name = unique("u503")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert umount_sync_ok(m)
        fail_uploads(service)
        for i in range(5):
            write_file(os.path.join(d, "g%d" % i), b"pending %d\n" % i)
        r = umount(m, "--timeout", "2")
        assert r.returncode == 1, r
        assert "still mounted" in r.stderr and "5 files" in r.stderr, r.stderr
        for i in range(5):
            assert os.path.join(m.mountpoint, name, "g%d" % i) in r.stderr, r.stderr
        assert "nothing is lost" in r.stderr, r.stderr
        # still mounted, the files still queued, nothing kept
        assert os.path.ismount(m.mountpoint) and m.proc.poll() is None
        wb = control(m)["writeback"]
        assert wb["pendingFiles"] == 5 and wb["failedFiles"] == 0, wb
        assert kept_files(cache) == []
        # the service answers again: the same command now succeeds
        service.clear_faults()
        r = umount(m)
        assert r.returncode == 0, r
        assert daemon_ended(m) == 0, m.log()[-3000:]
    finally:
        service.clear_faults()
        done(m)
    out = sh(service, container, "cat /workspace/%s/g0 /workspace/%s/g4" % (name, name))
    assert out == "pending 0\npending 4\n", out


def umount_sync_ok(m):
    """The mount has nothing pending (the directory made)."""
    r = status_of(m.mountpoint, "--wait")
    return r.returncode == 0


@pytest.mark.parametrize("n", [1, 30])
def test_u_reports_kept_files_and_unmounts(service, container, need_fuse, tmp_path, n):
    """Each kept file is named, up to 10; more are counted, not listed
    (thousands of lines would hide the cause)."""
    m, cache = mount_with_cache(service, container, tmp_path)
    name = unique("ukept")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert umount_sync_ok(m)
        refuse_uploads(service)
        for i in range(n):
            write_file(os.path.join(d, "refused%02d" % i), b"refused\n")
        r = umount(m)
        assert r.returncode == 1, r
        assert os.path.join(cache, "kept") in r.stderr, r.stderr
        shown = [i for i in range(n) if "/workspace/%s/refused%02d\n" % (name, i) in r.stderr]
        assert len(shown) == min(n, 10), r.stderr
        assert ("and %d more" % (n - 10) in r.stderr) == (n > 10), r.stderr
        assert len(r.stderr.splitlines()) < 40, r.stderr
        assert not os.path.ismount(m.mountpoint)
        assert daemon_ended(m) is not None, "mbfs -u returned before the daemon ended"
    finally:
        service.clear_faults()
        done(m)
    kept = kept_files(cache)
    assert len(kept) == n and all(open(k, "rb").read() == b"refused\n" for k in kept), kept
    # told now: the next mount does not tell it again
    assert not os.path.exists(os.path.join(cache, "unsent.json"))


def test_u_usage_and_not_a_mount(tmp_path):
    r = subprocess.run([mbtest.MBFS, "-u"], capture_output=True, text=True)
    assert r.returncode == 2 and "missing MOUNTPOINT" in r.stderr, r
    r = subprocess.run([mbtest.MBFS, "-u", "--bogus", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown option" in r.stderr, r
    r = subprocess.run([mbtest.MBFS, "-u", "--timeout", "soon", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "invalid --timeout" in r.stderr, r
    r = subprocess.run([mbtest.MBFS, "-u", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "not an mbfs mount" in r.stderr, r


def plain_unmount(m):
    """fusermount3 -u, then the daemon's end (it finishes after)."""
    subprocess.run(["fusermount3", "-u", m.mountpoint], check=True)
    return m.proc.wait(120)


def test_plain_unmount_with_kept_files_is_told_at_the_next_contact(service, container, need_fuse, tmp_path):
    # a cache directory where the default ones go ($XDG_CACHE_HOME/mbfs/ID-...),
    # so that --status finds it from the mountpoint or the container id
    xdg = tmp_path / "xdg"
    cache = str(xdg / "mbfs" / (container["id"] + "-test"))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = mbtest.Mount(service, container, writeback=True, mountpoint=str(mnt),
                     options=["cache_dir=" + cache])
    name = unique("plainkept")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert umount_sync_ok(m)
        refuse_uploads(service)
        write_file(os.path.join(d, "lost"), b"would be lost\n")
        plain_unmount(m)
    finally:
        service.clear_faults()
        done(m)
    guest = "/workspace/%s/lost" % name
    # no mount: --status of the cache directory says it, exit 1
    r = status_of(cache)
    assert r.returncode == 1, r
    assert guest in r.stdout and os.path.join(cache, "kept") in r.stdout, r.stdout
    r = status_of(cache, "--json")
    rec = json.loads(r.stdout)["unsent"]
    assert rec["kept"][0]["path"] == guest and rec["mountpoint"] == m.mountpoint, rec
    # the same from where it was mounted, or from the container's id
    env = dict(os.environ, XDG_CACHE_HOME=str(xdg))
    for arg in (str(mnt), container["id"]):
        r = subprocess.run([mbtest.MBFS, "--status", arg], capture_output=True,
                           text=True, timeout=120, env=env)
        assert r.returncode == 1 and guest in r.stdout, (arg, r)
    # the next mount prints it
    m2 = mbtest.Mount(service, container, writeback=True, options=["cache_dir=" + cache])
    try:
        assert guest in m2.log() and "did not put everything" in m2.log(), m2.log()
        r = status_of(m2.mountpoint)
        assert r.returncode == 0 and "before:" in r.stdout and guest in r.stdout, r
        # mbexec warns, once
        first = mbtest.run_mbexec(service, ["true"], cwd=m2.mountpoint, text=True)
        assert first.returncode == 0, first
        assert guest in first.stderr and "kept" in first.stderr, first.stderr
        second = mbtest.run_mbexec(service, ["true"], cwd=m2.mountpoint, text=True)
        assert second.returncode == 0 and "kept" not in second.stderr, second.stderr
    finally:
        rc = m2.unmount()
    assert rc == 0 and not mbtest.sanitizer_report(m2.log()), m2.log()
    # told by that mount, which sent everything: gone
    assert not os.path.exists(os.path.join(cache, "unsent.json"))


def test_plain_unmount_during_an_outage_is_told_and_sent_by_the_next_mount(service, container, need_fuse, tmp_path):
    m, cache = mount_with_cache(service, container, tmp_path, "op_timeout=2")
    name = unique("plain503")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert umount_sync_ok(m)
        fail_uploads(service)
        for i in range(3):
            write_file(os.path.join(d, "h%d" % i), b"late %d\n" % i)
        plain_unmount(m)
    finally:
        service.clear_faults()
        done(m)
    r = status_of(cache)
    assert r.returncode == 1, r
    assert "3 files not sent" in r.stdout, r.stdout
    for i in range(3):
        assert os.path.join(m.mountpoint, name, "h%d" % i) in r.stdout, r.stdout
    m2 = mbtest.Mount(service, container, writeback=True, options=["cache_dir=" + cache])
    try:
        assert "3 files not sent" in m2.log(), m2.log()
        assert status_of(m2.mountpoint, "--wait").returncode == 0
        out = sh(service, container, "cat /workspace/%s/h0 /workspace/%s/h2" % (name, name))
        assert out == "late 0\nlate 2\n", out
    finally:
        rc = m2.unmount()
    assert rc == 0 and not mbtest.sanitizer_report(m2.log()), m2.log()
    assert not os.path.exists(os.path.join(cache, "unsent.json"))


@pytest.fixture
def frozen_svc(need_fuse):
    """A service of this test's own, frozen (SIGSTOP) in the test."""
    s = mbtest.Service()
    yield s
    mbtest.thaw(s.proc.pid)
    s.stop()


@pytest.mark.parametrize("op_timeout,timeout", [(2, 1), (600, 2)], ids=["failed", "in-flight"])
def test_u_against_a_frozen_service_keeps_the_mount_and_says_so(frozen_svc, tmp_path, op_timeout, timeout):
    """--timeout T is how long the sandbox may not answer: after the
    batch's tries failed (op_timeout=2), or while the batch still waits
    for its answer (op_timeout of 10 minutes: it counts from when the
    batch left). mbfs -u returns while the service is still frozen, keeps
    the mount, and leaves no process behind holding its caller's pipes."""
    svc = frozen_svc
    c = svc.create_container()
    m, cache = mount_with_cache(svc, c, tmp_path, "op_timeout=%d" % op_timeout)
    name = unique("ufrozen")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert umount_sync_ok(m)
        mbtest.freeze(svc.proc.pid)
        try:
            write_file(os.path.join(d, "late"), b"late\n")
            r = umount(m, "--timeout", str(timeout))
            assert os.path.ismount(m.mountpoint) and m.proc.poll() is None
        finally:
            mbtest.thaw(svc.proc.pid)
        assert r.returncode == 1, r
        assert "still mounted: 1 file" in r.stderr, r.stderr
        # at least T: the batch may have waited longer before -u looked
        quiet = re.search(r"has not answered for (\d+)s", r.stderr)
        assert quiet and int(quiet.group(1)) >= timeout, r.stderr
        assert os.path.join(m.mountpoint, name, "late") in r.stderr, r.stderr
        r = umount(m)
        assert r.returncode == 0, r
        assert daemon_ended(m) == 0, m.log()[-3000:]
    finally:
        mbtest.thaw(svc.proc.pid)
        done(m)
    assert sh(svc, c, "cat /workspace/%s/late" % name) == "late\n"
    assert kept_files(cache) == []
