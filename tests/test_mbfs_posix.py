"""mbfs behaving as programs expect of a local disk: files open across
unlink and rename-over, directory times, inode numbers, long names."""
import errno
import os

import pytest

import mbtest
from test_mbfs_helpers import read_file, sh, sync, unique, write_file


@pytest.fixture
def d(mount):
    path = mount.path(unique("px"))
    os.mkdir(path)
    return path


def rel(mount, path):
    return "/workspace/" + os.path.relpath(path, mount.mountpoint)


def no_hidden_on_sandbox(service, container, mount, d):
    """Nothing of a file gone while open shows on the sandbox."""
    sync(mount)   # what mbexec does before a command
    return sh(service, container, "ls -A '%s'" % rel(mount, d)).split()


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "on-sandbox"])
def test_reader_keeps_old_bytes_across_replace(service, container, mount, d, queued):
    """queued: the old file is still in the write-back queue when it is
    opened and replaced; on-sandbox: it was sent first."""
    f, tmp = os.path.join(d, "f"), os.path.join(d, "f.tmp")
    write_file(f, b"old contents\n")
    if not queued:
        sync(mount)
    ino = os.stat(f).st_ino
    fd = os.open(f, os.O_RDONLY)            # opened, nothing read yet
    write_file(tmp, b"new\n")
    os.replace(tmp, f)                      # an editor's atomic save
    try:
        assert os.read(fd, 4) == b"old "
        assert os.read(fd, 100) == b"contents\n"
        st = os.fstat(fd)
        assert st.st_size == 13 and st.st_ino == ino
    finally:
        os.close(fd)
    assert read_file(f) == b"new\n"
    assert no_hidden_on_sandbox(service, container, mount, d) == ["f"]   # syncs
    assert sh(service, container, "cat '%s'" % rel(mount, f)) == "new\n"
    assert sorted(os.listdir(d)) == ["f"]


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "on-sandbox"])
def test_unlinked_open_file_reads_writes_and_fstats(service, container, mount, d, queued):
    f = os.path.join(d, "gone")
    write_file(f, b"hello world\n")
    if not queued:
        sync(mount)
    fd = os.open(f, os.O_RDWR)
    try:
        assert os.pread(fd, 5, 0) == b"hello"   # loaded before it goes
        os.unlink(f)
        assert not os.path.exists(f)
        assert os.listdir(d) == []
        assert os.pread(fd, 100, 0) == b"hello world\n"
        st = os.fstat(fd)
        assert st.st_size == 12 and st.st_nlink == 0
        assert os.pwrite(fd, b"HE", 0) == 2
        os.ftruncate(fd, 5)
        assert os.pread(fd, 100, 0) == b"HEllo"
        assert os.fstat(fd).st_size == 5
        os.fsync(fd)
    finally:
        os.close(fd)
    assert not os.path.exists(f)
    assert no_hidden_on_sandbox(service, container, mount, d) == []
    # the name is free again
    write_file(f, b"another\n")
    sync(mount)
    assert sh(service, container, "cat '%s'" % rel(mount, f)) == "another\n"


def test_file_created_here_and_unlinked_while_open(service, container, mount, d):
    f = os.path.join(d, "fresh")
    fd = os.open(f, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o644)
    try:
        os.write(fd, b"scratch")
        os.unlink(f)
        assert os.pread(fd, 100, 0) == b"scratch"
        assert os.fstat(fd).st_size == 7
    finally:
        os.close(fd)
    assert no_hidden_on_sandbox(service, container, mount, d) == []


OLD = 1000000   # 1970-01-12: any change through the mount is later


def mtime(path):
    return os.stat(path).st_mtime


def test_directory_mtime_advances_when_entries_change(service, container, mount, d):
    other = os.path.join(d, "other")
    os.mkdir(other)
    changes = [
        ("create", lambda: write_file(os.path.join(d, "a"), b"a"), [d]),
        ("mkdir", lambda: os.mkdir(os.path.join(d, "sub")), [d]),
        ("symlink", lambda: os.symlink("a", os.path.join(d, "ln")), [d]),
        ("rename within", lambda: os.rename(os.path.join(d, "a"), os.path.join(d, "b")), [d]),
        ("rename across", lambda: os.rename(os.path.join(d, "b"), os.path.join(other, "b")), [d, other]),
        ("rename over", lambda: (write_file(os.path.join(d, "c"), b"c"),
                                 os.replace(os.path.join(d, "c"), os.path.join(other, "b"))), [d, other]),
        ("unlink", lambda: os.unlink(os.path.join(other, "b")), [other]),
        ("rmdir", lambda: os.rmdir(os.path.join(d, "sub")), [d]),
    ]
    for what, change, dirs in changes:
        for p in dirs:
            os.utime(p, (OLD, OLD))
            assert mtime(p) == OLD, what
        change()
        for p in dirs:
            assert mtime(p) > OLD, what
    # the sandbox agrees (rsync -a compares the times it reads here)
    sync(mount)
    for p in (d, other):
        assert int(sh(service, container, "stat -c %%Y '%s'" % rel(mount, p))) > OLD


def test_inode_numbers_survive_renames(service, container, mount, d):
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"a")
    ino_a = os.stat(a).st_ino
    os.rename(a, b)
    assert os.stat(b).st_ino == ino_a
    assert {e.name: e.inode() for e in os.scandir(d)}["b"] == ino_a
    # something new under the old name is another file
    write_file(a, b"new a")
    assert os.stat(a).st_ino not in (ino_a, 0)
    assert os.stat(b).st_ino == ino_a
    # rename over: the target takes the source's number
    ino_new_a = os.stat(a).st_ino
    os.replace(a, b)
    assert os.stat(b).st_ino == ino_new_a
    # a directory carries what is inside it
    src = os.path.join(d, "dir")
    os.mkdir(src)
    write_file(os.path.join(src, "x"), b"x")
    ino_dir, ino_x = os.stat(src).st_ino, os.stat(os.path.join(src, "x")).st_ino
    dst = os.path.join(d, "moved")
    os.rename(src, dst)
    assert os.stat(dst).st_ino == ino_dir
    assert os.stat(os.path.join(dst, "x")).st_ino == ino_x
    # and back: still the same numbers
    os.rename(dst, src)
    assert os.stat(os.path.join(src, "x")).st_ino == ino_x


def test_inode_numbers_stable_across_remounts(service, container, mount, d):
    f = os.path.join(d, "stay")
    write_file(f, b"s")
    sync(mount)   # on the sandbox for the second mount to see
    before = {p: os.stat(p).st_ino for p in (d, f)}
    name = os.path.relpath(f, mount.mountpoint)
    m2 = mbtest.Mount(service, container)
    try:
        assert os.stat(m2.path(os.path.relpath(d, mount.mountpoint))).st_ino == before[d]
        assert os.stat(m2.path(name)).st_ino == before[f]
    finally:
        assert m2.unmount() == 0
    m2.check_clean_log()


def test_name_longer_than_255_bytes_is_enametoolong(service, container, mount, d):
    ok = os.path.join(d, "n" * 255)
    write_file(ok, b"fits")
    assert read_file(ok) == b"fits"
    assert sh(service, container, "cat '%s'" % rel(mount, ok)) == "fits"
    long = os.path.join(d, "n" * 256)
    long_utf8 = os.path.join(d, "\u00e9" * 128)   # 256 bytes in UTF-8
    for p in (long, long_utf8):
        for what, fn in (("stat", lambda: os.stat(p)),
                         ("create", lambda: open(p, "wb").close()),
                         ("mkdir", lambda: os.mkdir(p)),
                         ("rename", lambda: os.rename(ok, p)),
                         ("symlink", lambda: os.symlink("t", p))):
            with pytest.raises(OSError) as e:
                fn()
            assert e.value.errno == errno.ENAMETOOLONG, what
    assert sorted(os.listdir(d)) == ["n" * 255]
