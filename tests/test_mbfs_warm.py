"""mbfs: warm operations (a second `grep -r`, `git status`) ask the daemon
as little as the kernel allows. A file opened for reading only is closed
without a FLUSH request, a warm read is answered from the kernel's pages,
and the kernel stops asking for extended attributes after the first
answer. The control file's "ops" counts what the kernel sent the daemon;
changes the mount learns of still show."""
import errno
import json
import os
import re
import time

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, invalidate, read_file, sh, sync, unique, write_file


def ops(m):
    return json.loads(read_file(m.path(CONTROL)))["ops"]


def delta(before, after):
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def seed(service, container, d, n):
    """n small files in /workspace/d on the guest; their names and bytes."""
    sh(service, container, "mkdir -p /workspace/%s && cd /workspace/%s && "
       "for i in $(seq 1 %d); do echo \"file $i needle\" > f$i; done" % (d, d, n))
    return {"f%d" % i: ("file %d needle\n" % i).encode() for i in range(1, n + 1)}


def test_control_file_counts_requests(mount):
    o = ops(mount)
    assert set(o) == {"getattr", "open", "read", "flush", "release", "opendir", "readdir",
                      "releasedir"}
    p = mount.path(unique("count"))
    write_file(p, b"abc")
    before = ops(mount)
    assert read_file(p) == b"abc"
    after = ops(mount)
    assert after["open"] == before["open"] + 1
    # a write-back mount: close() of the writer queued the file, the read
    # is answered from the kernel's pages or the node's copy
    assert after["flush"] == before["flush"]


def test_warm_reads_ask_the_service_nothing_and_close_without_flush(service, container, mount):
    d = unique("warm")
    files = seed(service, container, d, 20)
    paths = {mount.path(d, n): data for n, data in files.items()}
    # cold, then twice more: the first read moves atime, which the kernel
    # then asks for once per file; a file read before the bulk read
    # brought the sandbox's nanoseconds is told of them once (the list
    # route gives whole seconds), and its next read is a first one again
    for _ in range(3):
        for p, data in paths.items():
            os.stat(p)
            assert read_file(p) == data
    before = ops(mount)
    service.reset_stats()
    for _ in range(3):
        for p, data in paths.items():
            with open(p, "rb") as f:
                os.fstat(f.fileno())
                assert f.read() == data
    after = ops(mount)
    assert service.stats()["requests"] == {}
    d_ops = delta(before, after)
    # each open still reaches the daemon (libfuse's high-level API has no
    # way around it), but nothing else: no read, no flush, no getattr
    assert d_ops.get("open") == 3 * len(paths), d_ops
    assert set(d_ops) <= {"open", "release"}, d_ops


def walk_and_read(top):
    """What `grep -r` asks of a tree: list each directory, read each file."""
    n = 0
    for d, _, names in os.walk(top):
        for name in names:
            with open(os.path.join(d, name), "rb") as f:
                f.read()
            n += 1
    return n


def settled_ops(m, before, opens):
    """The counts once the kernel's asynchronous releases are in."""
    for _ in range(100):
        d = delta(before, ops(m))
        if d.get("release", 0) >= opens:
            return d
        time.sleep(0.05)
    return delta(before, ops(m))


def test_warm_tree_walk_sends_only_opens_releases_and_listings(service, container, mount):
    """A warm `grep -r`: per file an open and a release, per directory an
    opendir, a listing, a releasedir and a getattr, nothing else (what
    warm.h says libfuse 3.14 and the kernel leave); never the service."""
    d = unique("walk")
    sh(service, container, "mkdir -p /workspace/%s && cd /workspace/%s && for s in a b c; do "
       "mkdir -p $s/in; for i in 1 2 3 4; do echo $s$i > $s/f$i; echo $s$i > $s/in/g$i; done; done"
       % (d, d))
    top = mount.path(d)
    dirs = 1 + 3 * 2
    # as above: cold, then the files read before the bulk read, told of
    # its finer times, once more
    for _ in range(3):
        files = walk_and_read(top)
    assert files == 24
    service.reset_stats()
    before = ops(mount)
    assert walk_and_read(top) == files
    d_ops = settled_ops(mount, before, files)
    assert service.stats()["requests"] == {}
    assert d_ops.get("open") == files and d_ops.get("release") == files, d_ops
    assert d_ops.get("opendir") == dirs and d_ops.get("readdir", 0) <= dirs, d_ops
    assert d_ops.get("getattr", 0) <= dirs, d_ops
    assert set(d_ops) <= {"open", "release", "opendir", "readdir", "releasedir",
                          "getattr"}, d_ops


def test_writers_still_flush(service, container, mount):
    d = unique("wflush")
    os.mkdir(mount.path(d))
    p = mount.path(d, "w")
    before = ops(mount)
    write_file(p, b"one\n")
    assert ops(mount)["flush"] == before["flush"] + 1
    sync(mount)
    assert sh(service, container, "cat /workspace/%s/w" % d) == "one\n"
    # O_RDONLY with O_TRUNC empties the file: that close has something to send
    before = ops(mount)
    fd = os.open(p, os.O_RDONLY | os.O_TRUNC)
    os.close(fd)
    assert ops(mount)["flush"] == before["flush"] + 1
    sync(mount)
    assert sh(service, container, "wc -c < /workspace/%s/w" % d).strip() == "0"
    # a reader closing while a writer holds the file leaves the upload to
    # the writer's close
    with open(p, "r+b") as w:
        w.write(b"two\n")
        w.flush()
        with open(p, "rb") as r:
            assert r.read() == b"two\n"
    sync(mount)
    assert sh(service, container, "cat /workspace/%s/w" % d) == "two\n"


def test_change_on_the_guest_shows_after_invalidate(service, container, mount):
    d = unique("inval")
    files = seed(service, container, d, 3)
    p = mount.path(d, "f1")
    for _ in range(3):
        assert read_file(p) == files["f1"]
    before = ops(mount)
    assert read_file(p) == files["f1"]
    assert ops(mount)["read"] == before["read"]          # from the kernel's pages
    # same size, most likely the same second: no timeout would notice
    sh(service, container, "echo 'file 1 NEEDLE' > /workspace/%s/f1" % d)
    assert read_file(p) == files["f1"]                   # still the kernel's copy
    invalidate(mount)
    before = ops(mount)
    assert read_file(p) == b"file 1 NEEDLE\n"
    assert ops(mount)["read"] > before["read"]
    # and warm again
    before = ops(mount)
    assert read_file(p) == b"file 1 NEEDLE\n"
    assert ops(mount)["read"] == before["read"]


def test_mbexec_change_shows_to_a_warm_reader(service, container, mount):
    d = mount.path(unique("mbxwarm"))
    os.mkdir(d)
    f = os.path.join(d, "f")
    write_file(f, b"old1\n")
    for _ in range(3):
        assert read_file(f) == b"old1\n"
    p = mbtest.run_mbexec(service, ["sh", "-c", "echo new1 > f"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert read_file(f) == b"new1\n"


def test_xattrs_are_asked_for_once(service, container, need_fuse):
    """The daemon has no xattr ops: libfuse answers ENOSYS, the kernel
    remembers it and answers EOPNOTSUPP itself from then on (before every
    write it would otherwise ask for security.capability)."""
    m = mbtest.Mount(service, container, options=["debug"])
    try:
        p = m.path(unique("xattr"))
        with open(p, "wb") as f:
            for _ in range(5):
                f.write(b"x" * 100)
                f.flush()
        for _ in range(3):
            with pytest.raises(OSError) as e:
                os.getxattr(p, "user.test")
            assert e.value.errno == errno.ENOTSUP
            with pytest.raises(OSError) as e:
                os.setxattr(p, "user.test", b"v")
            assert e.value.errno == errno.ENOTSUP
            with pytest.raises(OSError) as e:
                os.listxattr(p)
            assert e.value.errno == errno.ENOTSUP
        asked = re.findall(r"opcode: (GETXATTR|SETXATTR|LISTXATTR) \(", m.log())
        assert sorted(set(asked)) == sorted(asked), asked   # each at most once
        assert read_file(p) == b"x" * 500
    finally:
        rc = m.unmount()
        log = m.log()
        assert not mbtest.sanitizer_report(log), log
        assert rc == 0, log[-3000:]


def test_link_targets_are_kept_until_a_change(service, container, mount):
    d = unique("links")
    sh(service, container, "mkdir -p /workspace/%s && ln -s target-one /workspace/%s/l" % (d, d))
    p = mount.path(d, "l")
    assert os.readlink(p) == "target-one"
    service.reset_stats()
    for _ in range(5):
        assert os.readlink(p) == "target-one"
    assert service.stats()["requests"] == {}
    sh(service, container, "ln -sfn target-two /workspace/%s/l" % d)
    invalidate(mount)
    assert os.readlink(p) == "target-two"
    # through the mount: a new link under the same name shows at once
    os.unlink(p)
    os.symlink("target-three", p)
    assert os.readlink(p) == "target-three"
