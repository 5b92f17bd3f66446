"""Files some program keeps open, through the real mount: what a path
shows after a rename over an open name is the moved file, and writes
through a new open of it land on the sandbox; the open fd keeps the old
file."""
import os
import tempfile

import pytest

import mbtest
from test_mbfs_helpers import read_file, sh, sync, unique, write_file


@pytest.fixture
def d(mount):
    path = mount.path(unique("open"))
    os.mkdir(path)
    return path


def on_sandbox(service, container, mount, path):
    sync(mount)
    rel = "/workspace/" + os.path.relpath(path, mount.mountpoint)
    return sh(service, container, "cat '%s'" % rel)


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "queued"])
def test_a_rename_over_an_open_name_shows_the_moved_file(service, container, mount, d, landed):
    """The moved file was on the sandbox (landed) or still on its way
    (queued) when it replaced a name another fd holds open."""
    new, b = os.path.join(d, "new"), os.path.join(d, "b")
    write_file(new, b"N" * 5000)
    held = os.open(b, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(held, b"old")
        if landed:
            sync(mount)
        os.rename(new, b)
        assert os.stat(b).st_size == 5000
        assert read_file(b) == b"N" * 5000
        # a write through a new open goes to the moved file
        with open(b, "r+b") as f:
            f.write(b"XY")
        with open(b, "ab") as f:
            f.write(b"ZZ")
        want = "XY" + "N" * 4998 + "ZZ"
        assert read_file(b).decode() == want
        assert on_sandbox(service, container, mount, b) == want
        # the held fd keeps the file it opened, which is on neither side
        os.write(held, b"more")
        assert os.fstat(held).st_size == 7
        with open(b, "rb") as f:
            assert f.read(10) == b"XY" + b"N" * 8
    finally:
        os.close(held)
    assert on_sandbox(service, container, mount, b) == want
    assert read_file(b).decode() == want


def test_an_atomic_save_with_a_reader_of_the_old_file(service, container, mount, d):
    """Python's mkstemp + fsync + os.replace while a reader holds the old
    file: a fresh open reads the new content, the reader the old."""
    path = os.path.join(d, "conf")
    write_file(path, b"old\n")
    sync(mount)
    reader = open(path, "rb")
    try:
        fd, tmp = tempfile.mkstemp(dir=d)
        os.write(fd, b"new content\n")
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, path)
        assert read_file(path) == b"new content\n"
        assert os.stat(path).st_size == len(b"new content\n")
        assert reader.read() == b"old\n"
    finally:
        reader.close()
    assert on_sandbox(service, container, mount, path) == "new content\n"


def mbexec_in(service, d, script):
    r = mbtest.run_mbexec(service, ["sh", "-c", script], cwd=d)
    assert r.returncode == 0, r


def test_a_reader_at_the_end_reads_what_commands_append(service, container, mount, d):
    """tail's loop: a reader at the end of a file reads the lines two
    commands appended, not nothing and not NUL bytes."""
    path = os.path.join(d, "grow")
    write_file(path, b"start\n")
    with open(path, "rb") as reader:
        assert reader.read() == b"start\n"
        mbexec_in(service, d, "echo one >> grow")
        mbexec_in(service, d, "echo two >> grow")
        assert reader.read() == b"one\ntwo\n"
        assert os.fstat(reader.fileno()).st_size == len(b"start\none\ntwo\n")


def test_an_open_file_reads_what_a_command_rewrote(service, container, mount, d):
    """Saved here, held open, rewritten in place by a command: fstat and
    read agree on the command's bytes, also after a seek to 0."""
    path = os.path.join(d, "v")
    write_file(path, b"v1\n")
    with open(path, "rb") as f:
        assert f.read() == b"v1\n"
        mbexec_in(service, d, "printf 'version two, longer\\n' > v")
        want = b"version two, longer\n"
        assert os.fstat(f.fileno()).st_size == len(want)
        f.seek(0)
        assert f.read() == want
