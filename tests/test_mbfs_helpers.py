"""Helpers shared by the tests/test_mbfs_*.py suites (no tests here)."""
import hashlib
import json
import os
import subprocess
import time
import uuid

import pytest

import mbtest

CONTROL = ".mainbrella"
MiB = 1048576


def unique(prefix="t"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def sh(service, ident, cmd):
    """Run cmd on the sandbox; assert exit 0 and return stdout."""
    doc = service.exec(ident, cmd)
    assert doc["exitCode"] == 0, doc
    return doc["stdout"]


def no_pieces_left(service, ident, timeout=30):
    """True once the sandbox's /tmp holds no download pieces. The last
    ones go when the file is closed, and FUSE sends the close (release)
    after close() returned: wait for it."""
    deadline = time.monotonic() + timeout
    while True:
        left = sh(service, ident, "ls -A /tmp | grep -c mbfs-dl || true").strip()
        if left == "0" or time.monotonic() > deadline:
            return left == "0"
        time.sleep(0.1)


def guest_sha(service, ident, path):
    out = sh(service, ident, "sha256sum -- '%s'" % path)
    return out.split()[0]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def invalidate(mount):
    with open(mount.path(CONTROL), "w") as f:
        f.write("invalidate\n")


def sync(mount):
    """What mbexec does before a command: the mount sends what it holds back
    (files closed and queued for write-back, queued file times) before the
    write returns; a failure to send raises OSError."""
    mount.service.release_held()
    with open(mount.path(CONTROL), "w") as f:
        f.write("sync\n")


def close_fails_or_sync_does(mount, f, writeback):
    """Close f (written, its upload refused) and sync mount: with sync_close
    close() reports the failure; with write-back close() queues the file
    and the sync reports it."""
    if writeback:
        f.close()
        with pytest.raises(OSError):
            sync(mount)
    else:
        with pytest.raises(OSError):
            f.close()


def control(mount):
    """The mount's control file, parsed."""
    return json.loads(read_file(mount.path(CONTROL)))


def status(mount, *args):
    """`mbfs --status [ARGS] MOUNTPOINT`, its CompletedProcess."""
    if "--wait" in args:
        mount.service.release_held()
    return subprocess.run([mbtest.MBFS, "--status"] + list(args) + [mount.mountpoint],
                          capture_output=True, text=True, timeout=120)


def requests_of(service, route):
    """Requests the service took on route since its last reset_stats."""
    return service.stats().get("requests", {}).get(route, 0)


def status_wait(mountpoint):
    """`mbfs --status --wait MOUNTPOINT`: what a user runs to have what is
    queued on the sandbox (for mounts the tests start without Mount)."""
    r = subprocess.run([mbtest.MBFS, "--status", "--wait", mountpoint],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r


def hold_writeback(service, mount, d, held_ms=45000):
    """Send one file (d/blocker) in a write-back batch whose answer the
    service holds, and return once it is in flight: files closed meanwhile
    wait behind it (one batch is in flight at a time), so they go together
    in the next batch. The answer goes when the test waits for what is
    queued (sync, status --wait, mbexec, unmount: service.release_held()),
    or after held_ms, below the 60 s op_timeout of its PUT (a test whose own
    steps wait for the batch, as a symlink into a queued directory does,
    gives less)."""
    # what is queued goes first (d's own mkdir, most often): on a busy
    # machine it could leave alone, 200 ms before the blocker, and be the
    # batch the service holds
    sync(mount)
    service.fault(route="PUT /containers/files", count=1, match="wb-", heldMs=held_ms)
    write_file(os.path.join(d, "blocker"), b"b\n")
    deadline = time.monotonic() + 60
    while json.loads(read_file(mount.path(CONTROL)))["writeback"]["inFlightFiles"] != 1:
        assert time.monotonic() < deadline, ("the first batch never left",
                                             control(mount)["writeback"]["lastError"])
        time.sleep(0.02)
    # and held on the service's side: a release before the service took
    # the answer would miss it
    deadline = time.monotonic() + 30
    while service.held() < 1:
        assert time.monotonic() < deadline, "the service never held the first batch"
        time.sleep(0.02)


def finish(m):
    """Unmount m, check it ended cleanly (exit 0, no sanitizer report) and
    return its log."""
    rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, log[-3000:]
    return log


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def requests(service, route):
    return mbtest.requests_for(service.stats(), route)


def tree_digest(root):
    """{relative path: (kind, sha or link target, mode & 0o777)} of a local tree."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p), None)
            elif os.path.isdir(p):
                out[rel] = ("dir", None, st.st_mode & 0o777)
            else:
                out[rel] = ("file", sha(read_file(p)), st.st_mode & 0o777)
    return out


def guest_tree_digest(service, ident, root):
    """The same digest computed on the sandbox through the exec route."""
    script = (
        "cd '%s' && find . -mindepth 1 | LC_ALL=C sort | while IFS= read -r p; do "
        "if [ -L \"$p\" ]; then printf 'link\\t%%s\\t%%s\\n' \"$p\" \"$(readlink \"$p\")\"; "
        "elif [ -d \"$p\" ]; then printf 'dir\\t%%s\\t%%s\\n' \"$p\" \"$(stat -c %%a \"$p\")\"; "
        "else printf 'file\\t%%s\\t%%s\\t%%s\\n' \"$p\" \"$(sha256sum < \"$p\" | cut -d' ' -f1)\" "
        "\"$(stat -c %%a \"$p\")\"; fi; done" % root)
    out = {}
    for line in sh(service, ident, script).splitlines():
        parts = line.split("\t")
        rel = parts[1][2:]
        if parts[0] == "link":
            out[rel] = ("link", parts[2], None)
        elif parts[0] == "dir":
            out[rel] = ("dir", None, int(parts[2], 8))
        else:
            out[rel] = ("file", parts[2], int(parts[3], 8))
    return out


def until(pred, what, timeout=60):
    """Wait for pred() to hold (an event the test cannot be told of) and
    return its value, failing after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)
