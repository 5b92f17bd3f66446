"""Removals through the write-back queue: an unlink, or an rmdir of a
directory the mount knows is empty, travels in the next batch, in order
with what was queued before and after it, and is journaled so that a
kill -9 loses none of it. Until it lands the path shows gone, even to a
listing taken from the sandbox again.

Tests that need a removal to stay queued hold the queue with a first batch
the service answers slowly (hold_writeback): no timing is asserted."""
import errno
import os
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import (control, finish, guest_tree_digest, hold_writeback, invalidate,
                               read_file, requests_of, sh, status, sync, tree_digest, unique,
                               write_file)

REMOVE = "DELETE /containers/files/remove"
EXEC = "POST /containers/exec"
PUT = "PUT /containers/files"

pytestmark = pytest.mark.usefixtures("no_faults_left")


def api_requests(service):
    return sum(n for route, n in service.stats().get("requests", {}).items()
               if " /containers" in route)


def guest_ls(service, container, path):
    return sh(service, container, "ls -A %s 2>/dev/null; true" % path).split()


def make_tree(root, dirs=30, files=8):
    for i in range(dirs):
        d = os.path.join(root, "d%02d" % (i % 10), "s%02d" % i)
        os.makedirs(d, exist_ok=True)
        for j in range(files):
            write_file(os.path.join(d, "f%d" % j), b"%d %d\n" % (i, j))
        os.symlink("f0", os.path.join(d, "link"))


def test_rm_rf_of_a_tree_goes_in_a_few_batches(service, container, wb):
    name = unique("rmrf")
    root = wb.path(name)
    os.mkdir(root)
    make_tree(root)
    sync(wb)
    assert len(guest_ls(service, container, "/workspace/%s/d03" % name)) == 3
    invalidate(wb)                 # the mount knows the tree only as the sandbox shows it
    service.reset_stats()
    subprocess.run(["rm", "-rf", root], check=True)
    assert not os.path.exists(root)
    assert name not in os.listdir(wb.mountpoint)
    sync(wb)
    assert name not in guest_ls(service, container, "/workspace")
    # 270 files and links and 41 directories: no request of their own,
    # where one by one it took 311. What it costs depends on how fast rm
    # runs (make bench counts it): the listings rm read (one walk, or on a
    # busy machine, where the walk's window passes, up to one per
    # directory, and the test's listing of the mountpoint), and the
    # batches (one leaves every 30 ms while rm runs: a PUT and a command
    # each), at most one a directory on the slowest machine
    assert requests_of(service, REMOVE) == 0, service.stats()
    assert requests_of(service, PUT) <= 41, service.stats()
    assert requests_of(service, "GET /containers/files/list") <= 2 * 41 + 1, service.stats()
    assert api_requests(service) - requests_of(service, "GET /containers/files/list") <= 2 * 41 + 5, \
        service.stats()
    assert control(wb)["writeback"]["pendingRemoves"] == 0


def test_a_queued_removal_shows_gone_until_it_lands(service, container, wb):
    name = unique("gone")
    d = wb.path(name)
    os.mkdir(d)
    for f in ("a", "b"):
        write_file(os.path.join(d, f), f.encode())
    os.mkdir(os.path.join(d, "sub"))
    sync(wb)
    hold_writeback(service, wb, d)
    os.unlink(os.path.join(d, "a"))
    os.rmdir(os.path.join(d, "sub"))
    assert control(wb)["writeback"]["pendingRemoves"] == 2
    st = status(wb)
    assert "and 2 removals" in st.stdout, st.stdout
    # the sandbox still has both, and a listing taken from it again
    # does not bring them back
    assert guest_ls(service, container, "/workspace/" + name) == ["a", "b", "sub"]
    invalidate(wb)
    assert sorted(os.listdir(d)) == ["b", "blocker"]
    for p in ("a", "sub"):
        with pytest.raises(FileNotFoundError):
            os.stat(os.path.join(d, p))
    # made again here while the removal waits: the new one shows, and wins
    write_file(os.path.join(d, "a"), b"new\n")
    assert read_file(os.path.join(d, "a")) == b"new\n"
    sync(wb)
    assert sorted(guest_ls(service, container, "/workspace/" + name)) == ["a", "b", "blocker"]
    assert sh(service, container, "cat /workspace/%s/a" % name) == "new\n"
    assert control(wb)["writeback"]["pendingRemoves"] == 0


def test_removals_keep_their_order_with_what_comes_after(service, container, wb):
    name = unique("order")
    root = wb.path(name)
    os.mkdir(root)
    make_tree(root, dirs=4, files=3)
    sync(wb)
    hold_writeback(service, wb, root, held_ms=5000)    # its symlink waits for it
    # remove a tree, make it again with other content, remove a part again
    subprocess.run(["rm", "-rf", os.path.join(root, "d01")], check=True)
    os.makedirs(os.path.join(root, "d01", "s01"))
    write_file(os.path.join(root, "d01", "s01", "f0"), b"second\n")
    os.symlink("f0", os.path.join(root, "d01", "s01", "link"))
    os.unlink(os.path.join(root, "d02", "s02", "f1"))
    write_file(os.path.join(root, "d02", "s02", "f1"), b"again\n")
    subprocess.run(["rm", "-rf", os.path.join(root, "d03")], check=True)
    os.mkdir(os.path.join(root, "d03"))
    os.rmdir(os.path.join(root, "d03"))
    sync(wb)
    want = tree_digest(root)
    assert guest_tree_digest(service, container, "/workspace/" + name) == want
    invalidate(wb)
    assert tree_digest(root) == want


def test_a_directory_made_and_removed_here_never_travels(service, container, wb):
    name = unique("never")
    d = wb.path(name)
    os.mkdir(d)
    sync(wb)
    hold_writeback(service, wb, d)
    os.makedirs(os.path.join(d, "x", "y"))
    write_file(os.path.join(d, "x", "y", "f"), b"f")
    subprocess.run(["rm", "-rf", os.path.join(d, "x")], check=True)
    assert control(wb)["writeback"]["pendingRemoves"] == 0
    sync(wb)
    assert guest_ls(service, container, "/workspace/" + name) == ["blocker"]


def test_an_rmdir_the_sandbox_refuses_is_reported_and_shows_again(service, container, wb):
    name = unique("refused")
    d = wb.path(name)
    os.makedirs(os.path.join(d, "e"))
    sync(wb)
    assert os.listdir(os.path.join(d, "e")) == []     # the mount knows it is empty
    hold_writeback(service, wb, d)
    # another client puts a file in it meanwhile
    sh(service, container, "echo theirs > /workspace/%s/e/theirs" % name)
    os.rmdir(os.path.join(d, "e"))
    with pytest.raises(OSError) as e:
        sync(wb)
    assert e.value.errno == errno.EIO
    assert "the sandbox refused to remove '/%s/e'" % name in wb.log(), wb.log()[-2000:]
    assert os.listdir(os.path.join(d, "e")) == ["theirs"]
    assert sh(service, container, "cat /workspace/%s/e/theirs" % name) == "theirs\n"


def test_queued_removals_and_directory_changes_survive_kill9(service, container, need_fuse, tmp_path):
    cache = str(tmp_path / "cache")
    name = unique("crashrm")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    root = m.path(name)
    os.mkdir(root)
    make_tree(root, dirs=3, files=2)
    sync(m)
    hold_writeback(service, m, root)
    subprocess.run(["rm", "-rf", os.path.join(root, "d01")], check=True)
    os.unlink(os.path.join(root, "d02", "s02", "f0"))
    os.mkdir(os.path.join(root, "empty"), 0o750)
    write_file(os.path.join(root, "d00", "new"), b"new\n")   # queued: the time waits behind it
    os.utime(os.path.join(root, "d00"), ns=(1600000000123456789, 1600000000123456789))
    assert control(m)["writeback"]["pendingRemoves"] > 0
    m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    g = "/workspace/" + name
    assert "d01" in guest_ls(service, container, g)      # not sent before the kill
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        ls = guest_ls(service, container, g)
        assert "d01" not in ls and "empty" in ls, ls
        assert "f0" not in guest_ls(service, container, g + "/d02/s02")
        assert sh(service, container, "stat -c %a " + g + "/empty") == "750\n"
        assert sh(service, container, "stat -c %Y " + g + "/d00") == "1600000000\n"
        assert sh(service, container, "cat " + g + "/d00/new") == "new\n"
        assert "mbfs stopped: sent now" in m2.log(), m2.log()
    finally:
        finish(m2)


def test_a_tree_made_and_removed_in_a_loop_never_loses_a_file(service, container, wb):
    """mkdir -p, five files, rm -rf, over and over on two names, while
    batches come and go: a directory removed while its mkdir was on its
    way kept showing, and files closed with 0 went to kept/ (no such
    directory)."""
    base = wb.path(unique("loop"))
    os.mkdir(base)
    for i in range(12):
        t = os.path.join(base, "t%d" % (i % 2))
        os.makedirs(os.path.join(t, "a", "b"), exist_ok=True)
        for j in range(5):
            write_file(os.path.join(t, "a", "b", "f%d" % j), b"%d\n" % i)
        subprocess.run(["rm", "-rf", t])     # a transient ENOTEMPTY is issue 18's
        if os.path.lexists(t):
            subprocess.run(["rm", "-rf", t], check=True)
    os.makedirs(os.path.join(base, "t0", "a"))
    write_file(os.path.join(base, "t0", "a", "last"), b"last\n")
    sync(wb)
    assert control(wb)["writeback"]["failedFiles"] == 0
    assert guest_tree_digest(service, container, "/workspace/" + os.path.basename(base)) == tree_digest(base)


def test_a_storm_of_removals_goes_in_its_commands_without_a_put(service, container, mount):
    """A batch of names only goes in apply.sh's command, packed (gzip,
    base64) when it is too long for the exec request: removing 400 files
    the sandbox made is commands only, no PUT of a list or a script."""
    name = unique("packed")
    rd = "/workspace/" + name
    sh(service, container, "mkdir -p %s && cd %s && for i in $(seq 1000 1399); do "
       ": > file-with-a-longer-name-$i; done" % (rd, rd))
    d = mount.path(name)
    assert len(os.listdir(d)) == 400
    service.reset_stats()
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))
    sync(mount)
    got = service.stats()["requests"]
    assert PUT not in got and got.get(EXEC), got
    assert sh(service, container, "ls -A %s | wc -l" % rd).strip() == "0"
