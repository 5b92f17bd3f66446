"""mbfs: the kernel's own caches (names, attributes, pages) and their
invalidation. A warm stat or read never reaches the daemon, let alone the
service; every change the mount learns of (its own writes, mbexec's
invalidate, a listing that changed) shows at once; a change made on the
sandbox behind the mount's back shows once the timeouts pass."""
import os
import re
import time

import mbtest
from test_mbfs_helpers import control, read_file, requests, sh, unique, write_file

LIST = "GET /containers/files/list"
STAT = "GET /containers/files/stat"

# libfuse's request log (-o debug): one line per request the kernel sends
KERNEL_ASKS = re.compile(r"opcode: (LOOKUP|GETATTR|READ) \(")


def kernel_asks(m, since):
    """Lookups, getattrs and reads the kernel sent the daemon since the log
    had `since` characters."""
    return [l for l in m.log()[since:].splitlines() if KERNEL_ASKS.search(l)]


def eventually(check, what, limit=60):
    """Wait for check() to hold (a change on the guest showing once the
    timeouts pass); fail after limit seconds."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def unmount_clean(m):
    rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, log[-3000:]


def test_warm_stat_and_read_stay_in_the_kernel(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["debug"])
    try:
        d = unique("warm")
        sh(service, container, "mkdir -p /workspace/%s/sub && cd /workspace/%s/sub && "
           "head -c 200000 /dev/urandom > data && echo small > small" % (d, d))
        paths = [m.path(d, "sub", "data"), m.path(d, "sub", "small")]
        # cold, then once more: the first read moves atime, which the kernel
        # asks for once
        for _ in range(2):
            for p in paths:
                os.stat(p)
                read_file(p)
        want = {p: read_file(p) for p in paths}
        since = len(m.log())
        service.reset_stats()
        for _ in range(5):
            for p in paths:
                assert os.stat(p).st_size == len(want[p])
                assert read_file(p) == want[p]
        assert kernel_asks(m, since) == []
        assert service.stats()["requests"] == {}
    finally:
        unmount_clean(m)


def test_mbexec_changes_show_when_it_returns(service, container, mount):
    d = mount.path(unique("mbx"))
    os.mkdir(d)
    f, gone, new = (os.path.join(d, n) for n in ("f", "gone", "new"))
    sub = os.path.join(d, "sub")
    g = os.path.join(sub, "g")
    write_file(f, b"old1\n")
    write_file(gone, b"x")
    os.mkdir(sub)
    write_file(g, b"g1\n")
    for _ in range(2):   # everything in the kernel's caches
        assert read_file(f) == b"old1\n"
        assert read_file(g) == b"g1\n"
        assert os.path.exists(gone)
        assert not os.path.exists(new)
        assert sorted(os.listdir(d)) == ["f", "gone", "sub"]
    p = mbtest.run_mbexec(service, ["sh", "-c", "echo new1 > f; rm gone; echo n > new; "
                                    "echo g2 > sub/g; chmod 700 sub/g"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert read_file(f) == b"new1\n"          # same size, most likely the same second
    assert os.stat(f).st_size == 5
    assert not os.path.exists(gone)
    assert read_file(new) == b"n\n"
    assert read_file(g) == b"g2\n"
    assert os.stat(g).st_mode & 0o777 == 0o700
    assert sorted(os.listdir(d)) == ["f", "new", "sub"]
    # a name the command removed can be made again at once
    write_file(gone, b"again")
    assert read_file(gone) == b"again"


def test_mbexec_changing_a_type_shows_without_an_error(service, container, mount):
    """The kernel holds an inode of the old type for each name; the first
    stat after the change must not fail (EIO from a type mismatch)."""
    d = mount.path(unique("retype"))
    os.mkdir(d)
    f2d, f2l, d2f = (os.path.join(d, n) for n in ("f2d", "f2l", "d2f"))
    write_file(f2d, b"file\n")
    write_file(f2l, b"file\n")
    os.mkdir(d2f)
    for _ in range(2):
        for p in (f2d, f2l, d2f):
            os.lstat(p)
    p = mbtest.run_mbexec(service, ["sh", "-c", "rm f2d f2l && mkdir f2d && ln -s f2d f2l && "
                                    "rmdir d2f && echo now-a-file > d2f"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert os.path.isdir(f2d) and not os.path.islink(f2d)
    assert os.path.islink(f2l) and os.readlink(f2l) == "f2d"
    assert os.path.isfile(d2f) and read_file(d2f) == b"now-a-file\n"
    assert sorted(os.listdir(d)) == ["d2f", "f2d", "f2l"]


def test_names_a_command_removed_can_be_made_here_again(service, container, mount):
    """The kernel had the names; a command removed them: making them here
    (mkdir, symlink, link, a file) works at once, not ESTALE."""
    d = mount.path(unique("remade"))
    os.mkdir(d)
    names = ("dir", "link", "hard", "file")
    for n in names:
        write_file(os.path.join(d, n), b"old\n")
        os.lstat(os.path.join(d, n))
    write_file(os.path.join(d, "src"), b"src\n")
    p = mbtest.run_mbexec(service, ["rm", "dir", "link", "hard", "file"], cwd=d)
    assert p.returncode == 0, p.stderr
    os.mkdir(os.path.join(d, "dir"))
    os.symlink("src", os.path.join(d, "link"))
    os.link(os.path.join(d, "src"), os.path.join(d, "hard"))
    write_file(os.path.join(d, "file"), b"new\n")
    assert sorted(os.listdir(d)) == ["dir", "file", "hard", "link", "src"]
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    p = mbtest.run_mbexec(service, ["sh", "-c", "test -d dir && test -L link && cat hard file"], cwd=d)
    assert (p.returncode, p.stdout) == (0, b"src\nnew\n"), (p, rel)


def test_renamed_paths_are_still_invalidated(service, container, mount):
    d = mount.path(unique("mv"))
    os.mkdir(d)
    os.mkdir(os.path.join(d, "dir"))
    write_file(os.path.join(d, "a"), b"one\n")
    write_file(os.path.join(d, "dir", "x"), b"xx1\n")
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))
    os.rename(os.path.join(d, "dir"), os.path.join(d, "moved"))
    for _ in range(2):
        assert read_file(os.path.join(d, "b")) == b"one\n"
        assert read_file(os.path.join(d, "moved", "x")) == b"xx1\n"
    p = mbtest.run_mbexec(service, ["sh", "-c", "echo two > b; echo xx2 > moved/x"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert read_file(os.path.join(d, "b")) == b"two\n"
    assert read_file(os.path.join(d, "moved", "x")) == b"xx2\n"


def test_own_writes_are_seen_by_other_opens(mount):
    p = mount.path(unique("own"))
    write_file(p, b"aaaa\n")
    with open(p, "rb") as r:
        assert r.read() == b"aaaa\n"          # now in the kernel's pages
        with open(p, "r+b") as w:
            w.write(b"bbbb\n")
            w.flush()
            r.seek(0)
            assert r.read() == b"bbbb\n"      # before the writer closes
        r.seek(0)
        assert r.read() == b"bbbb\n"
    assert read_file(p) == b"bbbb\n"
    with open(p, "ab") as a:
        a.write(b"cc\n")
        a.flush()
        assert os.stat(p).st_size == 8
        assert read_file(p) == b"bbbb\ncc\n"
    assert os.stat(p).st_size == 8
    write_file(p, b"z")                        # truncated by open
    assert read_file(p) == b"z"
    assert os.stat(p).st_size == 1


def test_listing_follows_own_changes(mount):
    d = mount.path(unique("ls"))
    os.mkdir(d)
    a, b, sub = (os.path.join(d, n) for n in ("a", "b", "sub"))
    assert os.listdir(d) == []
    write_file(a, b"1")
    assert os.listdir(d) == ["a"]
    os.mkdir(sub)
    assert sorted(os.listdir(d)) == ["a", "sub"]
    os.rename(a, b)
    assert sorted(os.listdir(d)) == ["b", "sub"]
    assert not os.path.exists(a)
    assert os.stat(b).st_size == 1
    os.unlink(b)
    assert os.listdir(d) == ["sub"]
    assert not os.path.exists(b)
    os.rmdir(sub)
    assert os.listdir(d) == []
    assert not os.path.exists(sub)


def test_guest_change_shows_after_the_timeout(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["attr_timeout=1", "dir_timeout=1"])
    try:
        name = unique("behind")
        path = m.path(name)
        sh(service, container, "echo one > /workspace/" + name)
        for _ in range(2):
            assert read_file(path) == b"one\n"
        sh(service, container, "echo three-longer > /workspace/" + name)
        eventually(lambda: read_file(path) == b"three-longer\n", "the new content never showed")
        assert os.stat(path).st_size == len(b"three-longer\n")
        sh(service, container, "rm /workspace/" + name)
        eventually(lambda: not os.path.exists(path), "the removed file never went")
        assert name not in os.listdir(m.mountpoint)
        sh(service, container, "echo back > /workspace/" + name)
        eventually(lambda: os.path.exists(path), "the new file never showed")
        assert read_file(path) == b"back\n"
    finally:
        unmount_clean(m)


def test_expired_names_are_revalidated_with_one_listing(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["attr_timeout=2", "dir_timeout=2"])
    try:
        d = unique("reval")
        sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && "
           "for i in $(seq 1 40); do echo $i > f$i; done" % (d, d))
        paths = [m.path(d, "f%d" % i) for i in range(1, 41)]
        for p in paths:
            os.stat(p)
        time.sleep(2.5)   # past both timeouts: the kernel asks again
        service.reset_stats()
        for p in paths:
            assert os.stat(p).st_size > 0
        # one listing for the directory (and one for the mount's root, and a
        # stat of the root itself), not one request per file
        assert requests(service, LIST) <= 2
        assert requests(service, STAT) <= 1
    finally:
        unmount_clean(m)


def test_missing_names_stay_in_the_kernel_until_one_appears(service, container, need_fuse):
    """The kernel keeps a missing name (`git status` looks for the same
    missing files under .git again and again) and drops it once the mount
    learns that the name appeared, here from a listing fetched for a
    sibling's lookup after the directory's timeout, even though the
    negative timeout is an hour."""
    m = mbtest.Mount(service, container,
                     options=["attr_timeout=1", "dir_timeout=1", "negative_timeout=3600"])
    try:
        d = unique("neg")
        sh(service, container, "mkdir /workspace/%s && echo o > /workspace/%s/other" % (d, d))
        p = m.path(d, "later")
        assert not os.path.exists(p)
        before = control(m)["ops"]["getattr"]
        for _ in range(3):
            assert not os.path.exists(p)
        # the kernel answered; at most one lookup of the directory itself,
        # should its name have expired meanwhile
        assert control(m)["ops"]["getattr"] - before <= 1
        sh(service, container, "echo l > /workspace/%s/later" % d)
        time.sleep(1.2)   # the listing and the sibling's name expire
        assert read_file(m.path(d, "other")) == b"o\n"
        eventually(lambda: os.path.exists(p), "the new name never showed", limit=10)
        assert read_file(p) == b"l\n"
    finally:
        unmount_clean(m)
