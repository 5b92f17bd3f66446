"""mbfs against what the hosted runtime does (contract §9): a default (node)
container has no /workspace; a listing fails with 403 when an entry vanishes
during it; an idle container is destroyed and a generation has a hard
deadline; every command must finish in the foreground and fit the 32 KiB
exec request."""
import json
import os
import subprocess
import tempfile
import time

import pytest

import mbtest
from test_mbfs_helpers import (CONTROL, MiB, invalidate, read_file, sh, status_wait, sync, unique,
                               write_file)

LIST = "GET /containers/files/list"
IDLE_MS = 5000      # idle timeout of the short-lived services below


pytestmark = pytest.mark.usefixtures("no_faults_left")


def spec(ident, root):
    return "%s@%s:%s" % (ident["id"], ident["createdAt"], root)


def remote_kind(service, ident, path):
    """The entry type of path on the sandbox, or None when missing."""
    status, doc = service.request("GET", "/containers/files/stat",
                                  query=service.ident_query(ident, path=path))
    if status == 404:
        return None
    assert status == 200, (status, doc)
    return doc["type"]


def listed(service, ident):
    status, doc = service.request("GET", "/containers")
    assert status == 200, (status, doc)
    for c in doc["containers"]:
        if c["id"] == ident["id"] and c["createdAt"] == ident["createdAt"]:
            return c
    return None


def without_workspace(service, ident):
    """Make ident look like the hosted node image: no /workspace. Skips when
    the local service cannot take it away (it still mounts one there)."""
    if remote_kind(service, ident, "/workspace") is None:
        return
    status, doc = service.request("DELETE", "/containers/files/remove",
                                  query=service.ident_query(ident, path="/workspace"))
    if status != 200:
        pytest.skip("this local service keeps a /workspace on every container (%s)" % (doc,))
    assert remote_kind(service, ident, "/workspace") is None


@pytest.fixture
def fresh(service):
    """A container of the default image, for tests that change its root."""
    ident = service.create_container()
    yield ident
    service.delete_container(ident)


@pytest.fixture
def mnt():
    path = tempfile.mkdtemp(prefix="mbfs-hosted-", dir=mbtest.tmp_base())
    yield path
    if os.path.ismount(path):
        mbtest.fusermount_u(path)
    os.rmdir(path)


def wait_mounted(path, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.ismount(path) and os.path.exists(os.path.join(path, CONTROL)):
            return
        if proc.poll() is not None:
            raise AssertionError("mbfs exited: %r" % (proc.stdout.read(),))
        time.sleep(0.05)
    raise AssertionError("not mounted")


# ---- the default root ----

def test_missing_default_workspace_is_created(service, fresh, need_fuse):
    without_workspace(service, fresh)
    m = mbtest.Mount(service, fresh, remote="/workspace")
    try:
        assert remote_kind(service, fresh, "/workspace") == "directory"
        assert os.listdir(m.path()) == []
        write_file(m.path("hello.txt"), b"hi\n")
        sync(m)          # queued at close (write-back)
        assert sh(service, fresh, "cat /workspace/hello.txt") == "hi\n"
        assert json.loads(read_file(m.path(CONTROL)))["root"] == "/workspace"
    finally:
        rc = m.unmount()
    m.check_clean_log()
    assert rc == 0, m.log()


def test_create_mounts_default_workspace(service, mnt, need_fuse):
    p = subprocess.Popen([mbtest.MBFS, "--create", "-f", mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=service.env())
    ident = None
    try:
        wait_mounted(mnt, p, timeout=150)
        doc = json.loads(read_file(os.path.join(mnt, CONTROL)))
        ident = {"id": doc["id"], "createdAt": doc["createdAt"]}
        assert doc["root"] == "/workspace"
        write_file(os.path.join(mnt, "made.txt"), b"by --create\n")
        status_wait(mnt)     # queued at close (write-back)
        assert sh(service, ident, "cat /workspace/made.txt") == "by --create\n"
    finally:
        mbtest.fusermount_u(mnt)
        rc = p.wait(60)
        out = p.stdout.read().decode(errors="replace")
        if ident:
            service.delete_container(ident)
    assert rc == 0, out
    assert not mbtest.sanitizer_report(out), out


def test_missing_other_root_is_an_error_naming_it(service, fresh, mnt, need_fuse):
    for root in ("/workspace/no/such", "/nowhere"):
        r = subprocess.run([mbtest.MBFS, "-f", spec(fresh, root), mnt], capture_output=True,
                           env=service.env(), timeout=60, stdin=subprocess.DEVNULL)
        err = r.stderr.decode()
        lines = [l for l in err.splitlines() if l.strip()]
        assert r.returncode != 0 and len(lines) == 1, err
        assert root in lines[0] and "does not exist" in lines[0], err
        assert not os.path.ismount(mnt)
        assert remote_kind(service, fresh, root) is None


# ---- listings ----

def test_listing_403_race_is_asked_again(service, container, mount):
    name = unique("racy")
    sh(service, container, "mkdir /workspace/%s && touch /workspace/%s/a /workspace/%s/b"
       % (name, name, name))
    invalidate(mount)
    # one page refused as when an entry vanishes while it is listed
    service.fault(route=LIST, count=1, status=403, error="file_access_denied", match=name)
    assert sorted(os.listdir(mount.path(name))) == ["a", "b"]


def test_listing_lasting_403_still_fails(service, container, mount):
    """A directory too large to list through the guest (relist.h) goes
    the list route's way, and a 403 that lasts fails the listing."""
    name = unique("denied")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && touch a && "
       "seq 1 4100 | sed 's/^/f/' | xargs touch" % (name, name))
    invalidate(mount)
    service.fault(route=LIST, count=50, status=403, error="file_access_denied", match=name)
    with pytest.raises(PermissionError):
        os.listdir(mount.path(name))
    service.clear_faults()
    invalidate(mount)
    assert len(os.listdir(mount.path(name))) == 4101


# ---- deadlines ----

def test_control_file_shows_expires_at(service, container, mount):
    doc = json.loads(read_file(mount.path(CONTROL)))
    entry = listed(service, container)
    assert entry and doc["expiresAt"] == entry["expiresAt"]
    assert doc["createdAt"] < doc["expiresAt"]


def test_bad_keepalive_values_are_refused(service, container, mnt, need_fuse):
    for value in ("soon", "500ms", "-1"):
        r = subprocess.run([mbtest.MBFS, "-f", "-o", "keepalive=" + value,
                            spec(container, "/workspace"), mnt],
                           capture_output=True, env=service.env(), timeout=60,
                           stdin=subprocess.DEVNULL)
        err = r.stderr.decode()
        lines = [l for l in err.splitlines() if l.strip()]
        assert r.returncode != 0 and len(lines) == 1 and "keepalive" in lines[0], err
        assert not os.path.ismount(mnt)


@pytest.fixture
def idle_service():
    svc = mbtest.Service(extra_args=["--idle-timeout-ms", str(IDLE_MS)])
    yield svc
    svc.stop()


def test_listing_reports_the_idle_timeout_applied(idle_service):
    # a mount computes its keepalive from it
    status, doc = idle_service.request("GET", "/containers")
    assert status == 200, doc
    assert doc["limits"]["idleTimeoutMs"] == IDLE_MS


def test_keepalive_keeps_an_idle_mount_alive(idle_service, need_fuse):
    ident = idle_service.create_container()
    m = mbtest.Mount(idle_service, ident, options=["keepalive=1"])
    try:
        time.sleep(3 * IDLE_MS / 1000.0)       # idle, well past the idle timeout
        assert listed(idle_service, ident) is not None, idle_service.log()
        assert os.path.isdir(m.path())
        write_file(m.path("still.txt"), b"here\n")
        sync(m)          # queued at close (write-back)
        assert sh(idle_service, ident, "cat /workspace/still.txt") == "here\n"
    finally:
        rc = m.unmount()
        idle_service.delete_container(ident)
    m.check_clean_log()
    assert rc == 0, m.log()


def test_keepalive_off_lets_the_container_go(idle_service, need_fuse):
    ident = idle_service.create_container()
    m = mbtest.Mount(idle_service, ident, options=["keepalive=0"])
    try:
        deadline = time.time() + 10 * IDLE_MS / 1000.0
        while listed(idle_service, ident) is not None and time.time() < deadline:
            time.sleep(0.5)
        assert listed(idle_service, ident) is None
        invalidate(m)
        with pytest.raises(OSError):
            os.listdir(m.path())
    finally:
        rc = m.unmount()
    m.check_clean_log()
    assert rc == 0, m.log()
    assert "no longer running" in m.log()


# ---- guest commands ----

OUR_COMMANDS = {"split", "cat", "sha256sum", "touch", "df", "mv", "ln", "truncate", "xargs",
                "chmod", "stat", "rm", "sleep"}


def test_commands_leave_nothing_behind(service, container, mount):
    """Every guest command ends in the foreground: on the hosted runtime a
    background child would hold the exec's pipes, then stay a zombie."""
    d = unique("procs")
    os.mkdir(mount.path(d))
    big = os.urandom(2 * MiB + 7)
    write_file(mount.path(d, "big"), big)                  # parts joined by a script
    invalidate(mount)
    assert read_file(mount.path(d, "big")) == big          # split on the guest
    os.symlink("big", mount.path(d, "link"))               # ln -s
    os.link(mount.path(d, "big"), mount.path(d, "hard"))   # ln
    write_file(mount.path(d, "small"), b"0123456789")
    os.truncate(mount.path(d, "small"), 4)                 # truncate
    write_file(mount.path(d, "other"), b"x")
    os.rename(mount.path(d, "other"), mount.path(d, "small"))   # mv -fT
    os.chmod(mount.path(d, "small"), 0o4755)               # chmod with a special bit
    os.utime(mount.path(d, "big"), (1000000000, 1000000000))
    sync(mount)                                            # the touch script
    os.statvfs(mount.path())                               # df
    # a zombie keeps its command's name: none of ours may be left, dead or alive
    out = sh(service, container, "ps -eo stat=,comm=")
    procs = [l.split(None, 1) for l in out.splitlines() if l.strip()]
    assert not [p for p in procs if len(p) > 1 and p[1].strip() in OUR_COMMANDS], out


def statuses(service, route):
    return service.stats().get("statuses", {}).get(route, {})


def test_touch_batches_fit_the_exec_request(service, container, mount):
    """Names whose bytes JSON escapes six times: each batch still fits."""
    d = unique("ctl")
    tail = "\x01" * 150
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && for i in $(seq 100 219); "
       "do : > \"n$i%s\"; done" % (d, d, tail))
    names = ["n%d%s" % (i, tail) for i in range(100, 220)]
    assert sorted(os.listdir(mount.path(d))) == sorted(names)
    puts = mbtest.requests_for(service.stats(), "PUT /containers/files")
    for n in names:
        os.utime(mount.path(d, n), (1500000000, 1500000000))
    sync(mount)
    out = sh(service, container, "stat -c %%Y /workspace/%s/* | sort | uniq -c" % d)
    assert out.split() == ["120", "1500000000"], out
    assert "413" not in statuses(service, "POST /containers/exec")
    # cut to size, not sent as script files
    assert mbtest.requests_for(service.stats(), "PUT /containers/files") == puts


def test_long_command_travels_packed(service, container, mount):
    """A symlink whose command is 6 KiB but whose exec body would pass
    32 KiB (control characters take 6 bytes in JSON): it goes packed (gzip,
    base64) in the exec request, with no PUT of a script file."""
    d = unique("deep")
    comp = "\x01" * 200
    deep = "/".join([comp] * 8)
    sh(service, container, "mkdir -p '/workspace/%s/%s'" % (d, deep))
    target = "\x01" * 4000
    puts = mbtest.requests_for(service.stats(), "PUT /containers/files")
    os.symlink(target, mount.path(d, deep, "l"))
    assert os.readlink(mount.path(d, deep, "l")) == target
    out = sh(service, container, "p='/workspace/%s/%s/l'; stat -c %%s \"$p\"; "
             "readlink \"$p\" | tr -d '\\001' | wc -c; ls -a /tmp | grep -c mbfs-sh || true"
             % (d, deep))
    assert out.split() == ["4000", "1", "0"], out
    assert mbtest.requests_for(service.stats(), "PUT /containers/files") == puts
    assert "413" not in statuses(service, "POST /containers/exec")
