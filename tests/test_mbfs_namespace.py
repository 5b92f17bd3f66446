"""mbfs: names, links, modes, times, sizes: what ls, mv, ln, chmod, touch,
truncate and df show on the mount and on the sandbox."""
import ctypes
import errno
import os
import subprocess

import pytest

from test_mbfs_helpers import MiB, guest_sha, read_file, sh, sha, sync, unique, write_file

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def renameat2(src, dst, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("libc without renameat2")
    rc = libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), flags)
    return 0 if rc == 0 else ctypes.get_errno()


@pytest.fixture
def d(mount):
    path = mount.path(unique("ns"))
    os.mkdir(path)
    sync(mount)     # a new directory is queued (write-back) like a file
    return path


def rel(mount, path):
    return "/workspace/" + os.path.relpath(path, mount.mountpoint)


def test_mkdir_rmdir_modes(service, container, mount, d):
    sub = os.path.join(d, "sub")
    os.mkdir(sub, 0o750)
    assert os.stat(sub).st_mode & 0o777 == 0o750
    sync(mount)
    assert sh(service, container, "stat -c %a " + rel(mount, sub)).strip() == "750"
    write_file(os.path.join(sub, "f"), b"x")
    with pytest.raises(OSError) as e:
        os.rmdir(sub)
    assert e.value.errno == errno.ENOTEMPTY
    os.unlink(os.path.join(sub, "f"))
    os.rmdir(sub)
    assert not os.path.exists(sub)
    with pytest.raises(FileExistsError):
        os.mkdir(d)


def test_create_mode_and_exclusive(service, container, mount, d):
    p = os.path.join(d, "new")
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    os.close(fd)
    assert os.stat(p).st_mode & 0o777 == 0o640
    sync(mount)                             # a new file closed is queued (write-back)
    assert sh(service, container, "stat -c %a:%s " + rel(mount, p)).strip() == "640:0"
    with pytest.raises(FileExistsError):
        os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)


def test_create_does_not_truncate_file_made_on_sandbox(service, container, mount, d):
    p = os.path.join(d, "appendme")
    assert not os.path.exists(p)            # negative entry cached
    sh(service, container, "echo first > " + rel(mount, p))
    with open(p, "a") as f:                 # O_CREAT without O_EXCL
        f.write("second\n")
    sync(mount)
    assert sh(service, container, "cat " + rel(mount, p)) == "first\nsecond\n"


def test_rename_onto_existing_file(service, container, mount, d):
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"A")
    write_file(b, b"B")
    os.rename(a, b)
    assert not os.path.exists(a)
    assert read_file(b) == b"A"
    sync(mount)
    assert sh(service, container, "cat " + rel(mount, b)) == "A"


def test_rename_onto_another_name_of_the_same_file_does_nothing(service, container, mount, d):
    """rename(2) between two hard links of one file succeeds and leaves both
    (the sandbox's mv refuses them). The mount sees no link counts: the
    rename is queued like any other, and once its batch lands (the sync)
    both names show again."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"one file\n")
    sync(mount)
    os.link(a, b)
    sync(mount)
    assert sh(service, container, "stat -c %h " + rel(mount, a)) == "2\n"
    os.rename(a, b)
    sync(mount)   # no failure: rename(2) did what it does
    assert sorted(os.listdir(d)) == ["a", "b"]
    assert read_file(a) == read_file(b) == b"one file\n"
    sync(mount)
    assert sh(service, container, "cd %s && ls && cat a b" % rel(mount, d)) == \
        "a\nb\none file\none file\n"


def test_rename_directory_onto_empty_and_nonempty_dir(mount, d):
    src, empty, full = (os.path.join(d, n) for n in ("src", "empty", "full"))
    for p in (src, empty, full):
        os.mkdir(p)
    write_file(os.path.join(src, "f"), b"f")
    write_file(os.path.join(full, "g"), b"g")
    with pytest.raises(OSError) as e:
        os.rename(src, full)
    assert e.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    os.rename(src, empty)
    assert read_file(os.path.join(empty, "f")) == b"f"
    assert not os.path.exists(src)
    with pytest.raises(OSError) as e:
        os.rename(os.path.join(empty, "f"), full)
    assert e.value.errno == errno.EISDIR
    with pytest.raises(OSError) as e:
        os.rename(empty, os.path.join(full, "g"))
    assert e.value.errno == errno.ENOTDIR


def test_rename_noreplace_and_exchange(mount, d):
    a, b, c = (os.path.join(d, n) for n in "abc")
    write_file(a, b"A")
    write_file(b, b"B")
    assert renameat2(a, b, RENAME_NOREPLACE) == errno.EEXIST
    assert read_file(b) == b"B"
    assert renameat2(a, c, RENAME_NOREPLACE) == 0
    assert read_file(c) == b"A" and not os.path.exists(a)
    assert renameat2(b, c, RENAME_EXCHANGE) == errno.EINVAL
    assert read_file(b) == b"B" and read_file(c) == b"A"


def test_rename_open_file_keeps_writing_to_new_name(service, container, mount, d):
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    with open(a, "wb") as f:
        f.write(b"one")
        f.flush()
        os.rename(a, b)
        f.write(b"two")
    assert read_file(b) == b"onetwo"
    sync(mount)
    assert sh(service, container, "cat " + rel(mount, b)) == "onetwo"
    assert not os.path.exists(a)


def test_chmod_and_exec_bits(service, container, mount, d):
    p = os.path.join(d, "run.sh")
    write_file(p, b"#!/bin/sh\necho ran\n")
    os.chmod(p, 0o755)
    assert os.stat(p).st_mode & 0o777 == 0o755
    assert os.access(p, os.X_OK)
    sync(mount)     # still queued: the chmod of a new file travels with it
    assert sh(service, container, rel(mount, p)) == "ran\n"
    os.chmod(p, 0o600)
    assert os.stat(p).st_mode & 0o777 == 0o600
    sync(mount)     # queued too, in order with the rest
    assert sh(service, container, "stat -c %a " + rel(mount, p)).strip() == "600"
    # content changes keep the mode
    write_file(p, b"#!/bin/sh\necho again\n")
    assert os.stat(p).st_mode & 0o777 == 0o600


def test_symlink_readlink_hardlink(service, container, mount, d):
    target = os.path.join(d, "target")
    write_file(target, b"T")
    # on the sandbox first: a link of a file still queued for write-back is
    # a copy (README), and this test is about links the sandbox makes
    sync(mount)
    os.symlink("target", os.path.join(d, "sl"))
    assert os.readlink(os.path.join(d, "sl")) == "target"
    assert os.path.islink(os.path.join(d, "sl"))
    assert read_file(os.path.join(d, "sl")) == b"T"
    assert sh(service, container, "readlink " + rel(mount, os.path.join(d, "sl"))) == "target\n"
    os.symlink("nowhere", os.path.join(d, "dangling"))
    assert os.path.lexists(os.path.join(d, "dangling"))
    assert not os.path.exists(os.path.join(d, "dangling"))
    os.link(target, os.path.join(d, "hard"))
    assert read_file(os.path.join(d, "hard")) == b"T"
    assert sh(service, container, "stat -c %h " + rel(mount, target)).strip() == "2"
    os.unlink(os.path.join(d, "sl"))
    assert not os.path.lexists(os.path.join(d, "sl"))
    assert read_file(target) == b"T"


def test_touch_sets_times(service, container, mount, d):
    p = os.path.join(d, "t")
    write_file(p, b"x")
    r = subprocess.run(["touch", "-d", "2001-02-03 04:05:06 UTC", p], capture_output=True)
    assert r.returncode == 0, r
    assert int(os.stat(p).st_mtime) == 981173106
    sync(mount)        # times are batched: sent at once on "sync"
    assert sh(service, container, "stat -c %Y " + rel(mount, p)).strip() == "981173106"
    os.utime(p, (1000000000, 1200000000))
    assert int(os.stat(p).st_mtime) == 1200000000
    r = subprocess.run(["touch", os.path.join(d, "fresh")], capture_output=True)
    assert r.returncode == 0, r
    assert os.path.getsize(os.path.join(d, "fresh")) == 0


def test_truncate_up_and_down(service, container, mount, d):
    p = os.path.join(d, "big")
    data = os.urandom(3 * MiB)
    write_file(p, data)
    os.truncate(p, 3 * MiB + 4096)
    assert os.path.getsize(p) == 3 * MiB + 4096
    assert guest_sha(service, container, rel(mount, p)) == sha(data + b"\0" * 4096)
    os.truncate(p, MiB + 1)
    assert guest_sha(service, container, rel(mount, p)) == sha(data[:MiB + 1])
    assert read_file(p) == data[:MiB + 1]
    with open(p, "r+b") as f:
        f.truncate(10)
    assert read_file(p) == data[:10]
    sync(mount)     # 10 bytes at close: queued (write-back)
    assert sh(service, container, "stat -c %s " + rel(mount, p)).strip() == "10"
    os.truncate(p, 0)
    assert os.path.getsize(p) == 0


def test_df(mount):
    r = subprocess.run(["df", "-kP", mount.mountpoint], capture_output=True)
    assert r.returncode == 0, r
    fields = r.stdout.decode().splitlines()[-1].split()
    assert int(fields[1]) > 0
    st = os.statvfs(mount.mountpoint)
    assert st.f_blocks > 0 and st.f_bavail <= st.f_blocks


def test_xattrs_not_supported(mount, d):
    p = os.path.join(d, "x")
    write_file(p, b"x")
    with pytest.raises(OSError) as e:
        os.getxattr(p, "user.test")
    assert e.value.errno in (errno.ENOTSUP, errno.ENODATA)
    with pytest.raises(OSError) as e:
        os.setxattr(p, "user.test", b"v")
    assert e.value.errno == errno.ENOTSUP


def test_names_with_spaces_and_quotes(service, container, mount, d):
    name = "it's a \"name\" $(x) ;&"
    p = os.path.join(d, name)
    write_file(p, b"q" * (MiB + 5))
    assert name in os.listdir(d)
    os.rename(p, p + " 2")
    os.symlink(name + " 2", p)
    assert read_file(p) == b"q" * (MiB + 5)
    out = sh(service, container, "ls " + rel(mount, d).replace("/workspace/", "/workspace/'") + "'")
    assert name + " 2" in out.splitlines()


def test_poll_on_a_file_is_ready(mount):
    """poll()/select() on a file in the mount answer at once (mbexec polls a
    stdin redirected from the mount); the poll handle is not leaked (ASan)."""
    import select
    p = mount.path("polled.txt")
    with open(p, "wb") as f:
        f.write(b"x\n")
    with open(p, "rb") as f:
        po = select.poll()
        po.register(f, select.POLLIN)
        events = po.poll(5000)
        assert events and events[0][1] & select.POLLIN
        assert f.read() == b"x\n"
