"""Files some program keeps open, through the real mount: what a path
shows after a rename over an open name is the moved file, and writes
through a new open of it land on the sandbox; the open fd keeps the old
file."""
import errno
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

import mbtest
from test_mbfs_helpers import read_file, sh, sync, unique, until, write_file


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


def test_a_file_a_command_renames_takes_its_open_fds_along(service, container, mount, d):
    """A command renames a file held open here and appends to it: the fd
    reads the file under its new name, and writes through it land there,
    as on a local disk; the old name stays gone on both sides."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"hello\n")
    sync(mount)
    fd = os.open(a, os.O_RDWR)
    try:
        assert os.read(fd, 100) == b"hello\n"
        mbexec_in(service, d, "mv a b; echo more >> b")
        assert os.pread(fd, 100, 0) == b"hello\nmore\n"
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"local\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    assert sorted(os.listdir(d)) == ["b"]
    assert read_file(b) == b"hello\nmore\nlocal\n"
    assert on_sandbox(service, container, mount, b) == "hello\nmore\nlocal\n"
    rel = "/workspace/" + os.path.relpath(a, mount.mountpoint)
    assert sh(service, container, "test -e '%s' || echo gone" % rel) == "gone\n"


def test_an_fd_a_command_renamed_stats_and_changes_its_file(service, container, mount, d):
    """After the rename, fstat, fchmod and a fresh open of the new name
    are the same file the fd holds (the kernel's inode moved with it);
    the old name is a new file's, not the held one's."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"held\n")
    sync(mount)
    fd = os.open(a, os.O_RDWR)
    try:
        assert os.read(fd, 100) == b"held\n"
        mbexec_in(service, d, "mv a b; echo more >> b; echo new > a")
        st = os.fstat(fd)
        assert (st.st_size, st.st_nlink) == (len(b"held\nmore\n"), 1)
        assert os.stat(b).st_ino == st.st_ino != os.stat(a).st_ino
        os.fchmod(fd, 0o600)
        assert stat.S_IMODE(os.stat(b).st_mode) == 0o600
        assert read_file(a) == b"new\n"
    finally:
        os.close(fd)
    sync(mount)
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    assert sh(service, container, "stat -c %%a '%s/b'; cat '%s/a'" % (rel, rel)) == "600\nnew\n"


def test_an_fd_does_not_follow_a_new_file_that_took_its_inode_number(service, container, mount, d):
    """ext4 gives a freed inode number to the next new file at once: a
    held file replaced by `sed -i`, then a new file made, must not make
    the fd follow the new file (it wrote into an unrelated file)."""
    conf, out = os.path.join(d, "conf"), os.path.join(d, "out")
    write_file(conf, b"x=1\n")
    sync(mount)
    fd = os.open(conf, os.O_RDWR)
    try:
        assert os.read(fd, 100) == b"x=1\n"
        mbexec_in(service, d, "sed -i s/1/2/ conf; echo made > out")
        assert os.pread(fd, 100, 0) == b"x=1\n"
        os.pwrite(fd, b"LOST", 0)
    finally:
        os.close(fd)
    assert read_file(out) == b"made\n" and read_file(conf) == b"x=2\n"
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    assert sh(service, container, "cat '%s/out' '%s/conf'" % (rel, rel)) == "made\nx=2\n"


def test_two_held_files_a_command_swaps_follow_each_its_file(service, container, mount, d):
    """mv a t; mv b a; mv t b with both held open: each fd keeps its file,
    now under the other name, and writes through it land there."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"A\n")
    write_file(b, b"B\n")
    sync(mount)
    fa, fb = os.open(a, os.O_RDWR), os.open(b, os.O_RDWR)
    try:
        assert os.read(fa, 10) == b"A\n" and os.read(fb, 10) == b"B\n"
        mbexec_in(service, d, "mv a t && mv b a && mv t b")
        assert os.pread(fa, 10, 0) == b"A\n" and os.pread(fb, 10, 0) == b"B\n"
        os.pwrite(fa, b"a", 0)
        os.pwrite(fb, b"b", 0)
    finally:
        os.close(fa)
        os.close(fb)
    assert read_file(b) == b"a\n" and read_file(a) == b"b\n"
    sync(mount)
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    assert sh(service, container, "cat '%s/a' '%s/b'" % (rel, rel)) == "b\na\n"


def test_files_a_command_replaces_or_removes_keep_what_their_fds_read(service, container, mount, d):
    """A command renames a over b and removes c while both are held open
    here: the fds read what they read before, as on a local disk; a new
    open of b reads a's bytes; no write through them comes back."""
    a, b, c = (os.path.join(d, x) for x in "abc")
    write_file(a, b"from a\n")
    write_file(b, b"old b, longer\n")
    write_file(c, b"c\n")
    sync(mount)
    fb, fc = open(b, "r+b"), open(c, "r+b")
    try:
        assert fb.read() == b"old b, longer\n" and fc.read() == b"c\n"
        mbexec_in(service, d, "mv a b; rm c")
        assert os.pread(fb.fileno(), 100, 0) == b"old b, longer\n"
        assert os.pread(fc.fileno(), 100, 0) == b"c\n"
        assert read_file(b) == b"from a\n"
        fc.write(b"lost, as on a local disk\n")
        fc.flush()
    finally:
        fb.close()
        fc.close()
    assert sorted(os.listdir(d)) == ["b"]
    assert on_sandbox(service, container, mount, b) == "from a\n"
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    assert sh(service, container, "ls '%s'" % rel) == "b\n"


@pytest.fixture
def long_attrs(service, container, need_fuse):
    """A mount whose kernel keeps attributes for 10 minutes: what shows
    within a test comes from the mount telling the kernel, never from a
    timeout expiring."""
    m = mbtest.Mount(service, container, options=["attr_timeout=600", "dir_timeout=600"])
    yield m
    assert m.unmount() == 0, m.log()


def test_tail_f_follows_a_running_commands_log(service, container, long_attrs):
    """tail -f on the mount prints each line of a command's log while the
    command still runs (it waits for the test between the lines), not
    all of them at its end."""
    mount = long_attrs
    d = mount.path(unique("tail"))
    os.mkdir(d)
    log = os.path.join(d, "log")
    write_file(log, b"")
    sync(mount)
    rd = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    script = ("echo line1 >> log; while [ ! -e go1 ]; do sleep 0.1; done; "
              "echo line2 >> log; while [ ! -e go2 ]; do sleep 0.1; done; echo end >> log")
    cmd = subprocess.Popen([mbtest.MBEXEC, "sh", "-c", script], cwd=d, env=service.env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tail = subprocess.Popen(["tail", "-f", "-s", "0.2", log], stdout=subprocess.PIPE)
    seen = b""
    try:
        for line, go in ((b"line1\n", "go1"), (b"line2\n", "go2")):
            deadline = time.monotonic() + 60
            while line not in seen:
                assert cmd.poll() is None, ("the command ended before tail showed", line, seen)
                assert time.monotonic() < deadline, ("tail never showed", line, seen)
                ready, _, _ = select.select([tail.stdout], [], [], 0.5)
                if ready:
                    seen += os.read(tail.stdout.fileno(), 4096)
            # shown while the command waits for us: let it go on
            service.exec(container, "touch %s/%s" % (rd, go))
        assert cmd.wait(60) == 0, cmd.stderr.read()
        deadline = time.monotonic() + 60
        while b"end\n" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([tail.stdout], [], [], 0.5)
            if ready:
                seen += os.read(tail.stdout.fileno(), 4096)
        assert seen == b"line1\nline2\nend\n", seen
    finally:
        tail.kill()
        tail.wait()
        if cmd.poll() is None:
            cmd.kill()
        cmd.wait()


@pytest.mark.parametrize("fsync", [False, True], ids=["close", "fsync"])
def test_an_append_writer_and_commands_interleave(service, container, mount, d, fsync):
    """An O_APPEND writer held open across commands that append to the
    same log: every line lands, in the order written, on the sandbox and
    on the mount; nothing is refused as a conflict, and the next command
    starts."""
    log = os.path.join(d, "log")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in (1, 2):
            os.write(fd, b"local%d\n" % i)
            if fsync:
                os.fsync(fd)
            mbexec_in(service, d, "echo CMD%d >> log" % i)
        os.write(fd, b"local3\n")
    finally:
        os.close(fd)
    want = "local1\nCMD1\nlocal2\nCMD2\nlocal3\n"
    assert on_sandbox(service, container, mount, log) == want
    assert read_file(log).decode() == want
    mbexec_in(service, d, "true")
    assert "kept" not in mount.log() and "conflict" not in mount.log(), mount.log()


@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_APPEND, os.O_RDWR], ids=["append", "rw"])
def test_writes_through_an_fd_held_across_a_command_show_at_once(service, container, mount, d, flags):
    """The sync before a command sends the held file; writes through the fd
    after the command are still the path's: fstat, stat and a fresh read
    show them at once, and the sandbox after the close."""
    path = os.path.join(d, "e")
    write_file(path, b"hello\n")
    fd = os.open(path, flags)
    try:
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"A" * 99)
        mbexec_in(service, d, "true")
        os.write(fd, b"C" * 180)
        assert os.fstat(fd).st_size == 285
        assert os.stat(path).st_size == 285
        assert read_file(path) == b"hello\n" + b"A" * 99 + b"C" * 180
    finally:
        os.close(fd)
    assert os.stat(path).st_size == 285
    assert on_sandbox(service, container, mount, path) == "hello\n" + "A" * 99 + "C" * 180


# A program that keeps a file open and writes to it now and then (a
# logger): it never forks, so no copy of its fd is closed (a close of any
# copy would send the file). Each line from stdin is written; EOF closes.
WRITER = """
import os, sys
fd = os.open(sys.argv[1], int(sys.argv[2]))
os.lseek(fd, 0, os.SEEK_END)
print("open", flush=True)
for line in sys.stdin:
    os.write(fd, line.encode())
    print("written", flush=True)
os.close(fd)
"""


@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_APPEND, os.O_RDWR], ids=["append", "rw"])
def test_a_command_reads_what_an_open_writer_wrote(service, mount, d, flags):
    """As on a local disk: a program holds a file open and has written to
    it; a command run meanwhile reads what it wrote."""
    path = os.path.join(d, "log")
    write_file(path, b"start\n")
    sync(mount)
    w = subprocess.Popen([sys.executable, "-c", WRITER, path, str(flags)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "open\n"
        want = "start\n"
        for line in ("written\n", "more\n"):
            w.stdin.write(line)
            w.stdin.flush()
            assert w.stdout.readline() == "written\n"
            want += line
            r = mbtest.run_mbexec(service, ["cat", "log"], cwd=d)
            assert (r.returncode, r.stdout.decode()) == (0, want), r
        w.stdin.write("last\n")
        w.stdin.close()
        assert w.wait(60) == 0
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    r = mbtest.run_mbexec(service, ["cat", "log"], cwd=d)
    assert r.stdout == (want + "last\n").encode(), r


def test_a_second_open_after_a_utime_is_the_same_file(service, container, mount, d):
    """A command changed the file, then a utime here: a second open shares
    the first one's file, so writes through either show through both and
    under the path."""
    path = os.path.join(d, "e")
    write_file(path, b"one\n")
    w = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        mbexec_in(service, d, "echo cmd >> e")
        os.utime(path, (1500000000, 1500000000))
        r = os.open(path, os.O_RDONLY)
        try:
            os.write(w, b"mine\n")
            assert os.stat(path).st_size == 13
            assert os.pread(r, 100, 0) == b"one\ncmd\nmine\n"
        finally:
            os.close(r)
    finally:
        os.close(w)
    assert read_file(path) == b"one\ncmd\nmine\n"
    assert on_sandbox(service, container, mount, path) == "one\ncmd\nmine\n"


def test_a_reader_follows_a_rewrite_of_the_same_size_and_second(service, container, mount, d):
    """A command rewrites a file held open here, keeping its size and its
    modification time: after the command the fd reads the new bytes (a
    command may change anything; no stat can tell)."""
    path = os.path.join(d, "f")
    write_file(path, b"v1-aaaa\n")
    sync(mount)
    with open(path, "rb") as reader:
        assert reader.read() == b"v1-aaaa\n"
        mbexec_in(service, d, "t=$(stat -c %Y f); printf 'v2-bbbb\\n' > f; touch -d @$t f")
        assert os.pread(reader.fileno(), 100, 0) == b"v2-bbbb\n"
    assert read_file(path) == b"v2-bbbb\n"


def test_a_replaced_file_removed_while_open_frees_its_name(service, container, mount, d):
    """An editor's save (a new file renamed over one on the sandbox), then
    the file is opened, removed while open and closed: the sandbox's old
    file goes too, and the name can be a directory at once."""
    path = os.path.join(d, "a")
    write_file(path, b"on the sandbox\n")
    sync(mount)
    write_file(path + ".swp", b"saved\n")
    os.rename(path + ".swp", path)
    with open(path, "rb") as f:
        os.unlink(path)
        assert f.read() == b"saved\n"
    os.mkdir(path)
    write_file(os.path.join(path, "in"), b"in\n")
    sync(mount)
    assert sh(service, container, "cd /workspace/%s && test -d a && cat a/in" %
              os.path.relpath(d, mount.mountpoint)) == "in\n"
    assert "kept" not in mount.log(), mount.log()


def test_a_directory_renamed_over_a_name_removed_while_open(service, container, need_fuse):
    """The sandbox removes a file removed here while open a moment later;
    a directory renamed to its name meanwhile waits for that removal (it
    does not replace a file). One worker thread: it takes both, as it must
    for the removal to be still due."""
    m = mbtest.Mount(service, container, options=["max_threads=1"])
    try:
        d = m.path(unique("dirover"))
        os.mkdir(d)
        for i in range(10):
            f, sub = os.path.join(d, "f%d" % i), os.path.join(d, "sub%d" % i)
            os.mkdir(sub)
            write_file(f, b"x\n")
            sync(m)                     # on the sandbox: its removal is due there
            with open(f, "rb"):
                os.unlink(f)
            os.rename(sub, f)
            assert os.path.isdir(f)
        sync(m)
        out = sh(service, container, "cd /workspace/%s && for i in $(seq 0 9); do test -d f$i && echo d; done"
                 % os.path.relpath(d, m.mountpoint))
        assert out == "d\n" * 10
    finally:
        assert m.unmount() == 0, m.log()


def test_a_file_emptied_here_after_a_command_rewrote_it_is_no_conflict(service, container, mount, d):
    """An fd held across a command that rewrote the file, then the file
    saved whole here (open with O_TRUNC), then appended through the held
    fd: the sandbox gets what was written here, as a local disk would
    have it. The save replaced the command's version knowingly; it was
    refused as a conflict with it, read back as the command's bytes, and
    the next command did not start."""
    f = os.path.join(d, "f")
    write_file(f, b"start\n")
    sync(mount)
    held = os.open(f, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(held, b"held 1\n")
        r = mbtest.run_mbexec(service, ["sh", "-c", "printf 'rewritten\\n' > f"], cwd=d)
        assert r.returncode == 0, r
        write_file(f, b"saved\n")
        os.write(held, b"held 2\n")
    finally:
        os.close(held)
    assert read_file(f) == b"saved\nheld 2\n"
    r = mbtest.run_mbexec(service, ["cat", "f"], cwd=d)
    assert (r.returncode, r.stdout) == (0, b"saved\nheld 2\n"), r
    assert "conflict" not in mount.log(), mount.log()


def test_a_real_conflict_is_kept_and_the_next_command_starts(service, container, mount, d):
    """A file changed here and, behind the mount's back, on the sandbox:
    the sandbox keeps its version, the mount's is kept locally and named,
    and the next command starts (it did not: rc 255, "could not upload
    pending changes")."""
    f = os.path.join(d, "f")
    write_file(f, b"v1\n")
    sync(mount)
    rel = os.path.relpath(f, mount.mountpoint)
    sh(service, container, "printf 'the sandbox\\n' > /workspace/%s" % rel)
    with open(f, "r+b") as w:
        w.write(b"L")
    r = mbtest.run_mbexec(service, ["cat", "f"], cwd=d)
    assert (r.returncode, r.stdout) == (0, b"the sandbox\n"), r
    assert b"changed both in" in r.stderr and b"mbfs --status" in r.stderr, r.stderr
    status = subprocess.run([mbtest.MBFS, "--status", mount.mountpoint], capture_output=True,
                            env=service.env(), timeout=60)
    assert rel.encode() in status.stdout + status.stderr, status
    kept = [line for line in mount.log().splitlines() if "conflict" in line and "data kept in " in line]
    assert len(kept) == 1, mount.log()
    with open(kept[0].split("data kept in ")[1].strip(), "rb") as k:
        assert k.read() == b"L1\n"
    # and the one after it says nothing more
    r = mbtest.run_mbexec(service, ["true"], cwd=d)
    assert (r.returncode, r.stderr) == (0, b""), r


@pytest.mark.parametrize("size", [3 * 1024 * 1024], ids=["3m"])
def test_a_large_file_changed_on_both_sides_is_kept_not_overwritten(service, container, mount, d, size):
    """A file sent in parts goes up on its own at its close: when the
    sandbox changed it since the mount's copy was made, the close says
    EIO, the sandbox keeps its version and the mount's is kept (it was
    uploaded over the sandbox's change, without a word)."""
    f = os.path.join(d, "f")
    write_file(f, b"v" * size)
    sync(mount)
    rel = os.path.relpath(f, mount.mountpoint)
    sh(service, container, "printf 'the sandbox\\n' > /workspace/%s" % rel)
    with pytest.raises(OSError) as e:
        with open(f, "r+b") as w:
            w.write(b"L")
    assert e.value.errno == errno.EIO
    assert sh(service, container, "cat /workspace/%s" % rel) == "the sandbox\n"
    kept = [line for line in mount.log().splitlines() if "conflict" in line and "data kept in " in line]
    assert len(kept) == 1, mount.log()
    with open(kept[0].split("data kept in ")[1].strip(), "rb") as k:
        assert k.read() == b"L" + b"v" * (size - 1)
    r = mbtest.run_mbexec(service, ["cat", "f"], cwd=d)
    assert (r.returncode, r.stdout) == (0, b"the sandbox\n"), r


def removed_while_open(base):
    """What programs in and on a directory see once it is removed here:
    an fd on the directory, a shell standing in it, and a file in it that
    was removed while open."""
    seen = []
    d = os.path.join(base, "d")
    os.mkdir(d)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.rmdir(d)
        st = os.fstat(fd)
        seen.append(("fd", stat.S_ISDIR(st.st_mode), st.st_nlink, st.st_size, os.listdir(fd)))
        os.fchmod(fd, 0o700)
        seen.append(("fchmod", oct(os.fstat(fd).st_mode & 0o7777)))
    finally:
        os.close(fd)
    os.mkdir(os.path.join(base, "e"))
    r = subprocess.run("cd e && rmdir ../e && ls -a; echo ls=$?; stat -c '%F %h %s' .; pwd; "
                       "touch x 2>/dev/null; echo touch=$?", shell=True, cwd=base,
                       capture_output=True, text=True, timeout=60)
    seen.append(("shell", r.stdout.replace(base, "BASE")))
    os.mkdir(os.path.join(base, "f"))
    write_file(os.path.join(base, "f", "x"), b"abc")
    fd = os.open(os.path.join(base, "f", "x"), os.O_RDWR)
    try:
        os.unlink(os.path.join(base, "f", "x"))
        os.rmdir(os.path.join(base, "f"))
        st = os.fstat(fd)
        seen.append(("file", st.st_size, st.st_nlink, os.pread(fd, 10, 0)))
        os.pwrite(fd, b"Z", 3)
        seen.append(("written", os.fstat(fd).st_size, os.pread(fd, 10, 0)))
    finally:
        os.close(fd)
    return seen


def test_a_directory_removed_here_is_as_on_a_local_disk(mount, d, tmp_path):
    """A directory's fd and a shell's cwd live on once it is removed, as
    does a file in it that was removed while open: fstat, listings,
    fchmod, reads and writes answer as on a local disk (they failed with
    ESTALE: the kernel's node was named by its path only)."""
    want = removed_while_open(str(tmp_path))
    assert want[0] == ("fd", True, 0, 0, []), want   # the local disk's
    assert removed_while_open(d) == want
    assert sorted(os.listdir(d)) == []


def test_files_below_a_directory_being_renamed_stay_reachable(mount, d):
    """A directory renamed back and forth while other threads use files
    below it through held fds and a directory fd: nothing fails, as on a
    local disk. (A request named its file by a path taken before the
    rename ended: fchmod, fstat and openat failed with ENOENT.)"""
    import threading
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    os.mkdir(a)
    for i in range(8):
        write_file(os.path.join(a, "f%d" % i), b"data%d" % i)
    dfd = os.open(a, os.O_RDONLY)
    fds = [os.open(os.path.join(a, "f%d" % i), os.O_RDWR) for i in range(8)]
    stop, errors, renames = threading.Event(), [], [0]

    def renamer():
        while not stop.is_set() or renames[0] % 2:
            src, dst = (a, b) if renames[0] % 2 == 0 else (b, a)
            os.rename(src, dst)
            renames[0] += 1

    def user(k):
        for i in range(100):
            j = (k + i) % 8
            for what, fn in (("openat", lambda: os.close(os.open("f%d" % j, os.O_RDONLY, dir_fd=dfd))),
                             ("fstat", lambda: os.fstat(fds[j])),
                             ("fchmod", lambda: os.fchmod(fds[j], 0o644)),
                             ("listdir", lambda: os.listdir(dfd))):
                try:
                    fn()
                except OSError as e:
                    errors.append((what, e.errno))
    threads = [threading.Thread(target=user, args=(k,)) for k in range(2)]
    r = threading.Thread(target=renamer)
    try:
        r.start()
        [t.start() for t in threads]
        [t.join(120) for t in threads]
    finally:
        stop.set()
        r.join(60)
        for fd in fds + [dfd]:
            os.close(fd)
    assert renames[0] > 10 and not errors, (renames[0], errors[:10], len(errors))
    assert sorted(os.listdir(a)) == ["f%d" % i for i in range(8)]


def test_a_rename_that_fails_leaves_an_open_target_alone(mount, d):
    """A rename onto a file another fd holds open hides that file first;
    when the rename then fails, the file keeps its name (it was gone,
    and removed at the close)."""
    t = os.path.join(d, "t")
    write_file(t, b"target")
    fd = os.open(t, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            os.rename(mount.path(".mainbrella"), t)
        assert e.value.errno == errno.EBUSY
        assert read_file(t) == b"target"
    finally:
        os.close(fd)
    assert read_file(t) == b"target" and os.listdir(d) == ["t"]


def test_a_directory_fd_lists_the_directory_after_a_rename(mount, d):
    """An fd on a directory renamed through the mount lists it under its
    new name (it listed nothing: the old path)."""
    a = os.path.join(d, "a")
    os.mkdir(a)
    write_file(os.path.join(a, "x"), b"x")
    fd = os.open(a, os.O_RDONLY)
    try:
        os.rename(a, os.path.join(d, "b"))
        assert os.listdir(fd) == ["x"]
    finally:
        os.close(fd)


def test_a_log_a_running_command_rotates_is_followed_while_it_runs(service, container, long_attrs):
    """A reader holds a log open; a command rotates it (renames it, then
    writes on) and waits: the reader reads the lines written after the
    rename while the command still runs."""
    mount = long_attrs
    d = mount.path(unique("rotate"))
    os.mkdir(d)
    log = os.path.join(d, "log")
    write_file(log, b"start\n")
    sync(mount)
    rd = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    script = ("echo one >> log; mv log log.1; echo two >> log.1; "
              "while [ ! -e go ]; do sleep 0.1; done")
    with open(log, "rb") as reader:
        assert reader.read() == b"start\n"
        cmd = subprocess.Popen([mbtest.MBEXEC, "sh", "-c", script], cwd=d, env=service.env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            until(lambda: os.pread(reader.fileno(), 100, 0) == b"start\none\ntwo\n"
                  or cmd.poll() is not None, "the rotated log to show its new line")
            assert cmd.poll() is None, cmd.stderr.read()
            assert os.pread(reader.fileno(), 100, 0) == b"start\none\ntwo\n"
        finally:
            service.exec(container, "touch %s/go" % rd)
            assert cmd.wait(60) == 0, cmd.stderr.read()


def test_a_listed_directory_follows_a_running_command(service, container, long_attrs):
    """While a command runs, what a program watches by stat and readdir
    (an editor asking whether its file changed on disk, a file manager)
    shows the command's changes in a listed directory, not only after it
    ends: a rewrite of a file, a new file, a removed one. The mount keeps
    what it knows for 10 minutes, the command runs for 2."""
    d = long_attrs.path(unique("watched"))
    os.mkdir(d)
    for n in ("edited", "gone", " lead"):   # a name the listing keeps as it is
        write_file(os.path.join(d, n), b"mine\n")
    sync(long_attrs)
    before = os.stat(os.path.join(d, "edited"))
    assert sorted(os.listdir(d)) == [" lead", "edited", "gone"]
    cmd = subprocess.Popen([mbtest.MBEXEC, "sh", "-c",
                            "echo started; printf 'theirs, longer\\n' > edited; echo new > made; "
                            "rm gone; sleep 120"],
                           cwd=d, env=service.env(), stdout=subprocess.PIPE)
    try:
        assert cmd.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 100
        while True:
            st = os.stat(os.path.join(d, "edited"))
            names = sorted(os.listdir(d))
            if st.st_size != before.st_size and names == [" lead", "edited", "made"]:
                break
            assert cmd.poll() is None and time.monotonic() < deadline, (st, names)
            time.sleep(0.1)
        assert read_file(os.path.join(d, "edited")) == b"theirs, longer\n"
        assert cmd.poll() is None     # while the command still runs
    finally:
        cmd.send_signal(signal.SIGINT)     # Ctrl-C: the command ends there too
        cmd.wait(60)


def test_vim_says_its_file_changed_on_disk_while_a_command_runs(service, container, long_attrs):
    """vim (no vimrc, no swap file) edits a file on the mount while a
    command rewrites it and goes on running: :checktime warns (W11) before
    the command ends. The mount keeps what it knows for 10 minutes."""
    import pty
    d = long_attrs.path(unique("vim"))
    os.mkdir(d)
    write_file(os.path.join(d, "f.txt"), b"mine\n")
    sync(long_attrs)
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(d)
        os.execvp("vim", ["vim", "-u", "NONE", "-N", "-n", "-i", "NONE", "f.txt"])
    cmd = None
    seen = b""
    try:
        def read_some(wait):
            nonlocal seen
            if select.select([master], [], [], wait)[0]:
                seen += os.read(master, 65536)
        deadline = time.monotonic() + 60
        while b"f.txt" not in seen:      # vim shows the file: it has read it
            assert time.monotonic() < deadline, seen
            read_some(0.5)
        cmd = subprocess.Popen([mbtest.MBEXEC, "sh", "-c",
                                "printf 'theirs, longer\\n' > f.txt; echo written; sleep 120"],
                               cwd=d, env=service.env(), stdout=subprocess.PIPE)
        assert cmd.stdout.readline() == b"written\n"
        seen = b""
        deadline = time.monotonic() + 100
        while b"W11" not in seen:
            assert cmd.poll() is None and time.monotonic() < deadline, seen[-400:]
            os.write(master, b":checktime\r")
            read_some(0.3)
        assert cmd.poll() is None     # while the command still runs
    finally:
        if cmd is not None:
            cmd.send_signal(signal.SIGINT)
            cmd.wait(60)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(master)
