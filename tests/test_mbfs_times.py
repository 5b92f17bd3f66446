"""File times travel exactly: a file written through the mount gets the
mount's mtime on the sandbox to the nanosecond (a whole second could be
older than what a build made from it earlier in that second), and the
mount's own mtime does not step back once the sandbox has the file. So
`mbexec make` right after an edit, and `touch` then make, rebuild."""
import errno
import os
import subprocess
import time

import pytest

import mbtest
from test_mbfs_helpers import hold_writeback, sh, sync, unique, write_file

MAKEFILE = b"out: in\n\tcp in out\n"


def mbexec(service, d, *argv):
    p = mbtest.run_mbexec(service, list(argv), cwd=d)
    assert p.returncode == 0, p
    return p.stdout.decode()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def guest_mtime_ns(service, d, name):
    """find's %T@ on the sandbox: seconds and ten digits of fraction."""
    sec, frac = mbexec(service, d, "find", name, "-printf", "%T@").split(".")
    return int(sec) * 10**9 + int(frac[:9].ljust(9, "0"))


def test_mbexec_make_right_after_an_edit_rebuilds(service, container, mount):
    d = mount.path(unique("make"))
    os.mkdir(d)
    write(os.path.join(d, "Makefile"), MAKEFILE)
    stale = []
    # rounds back to back: most edits fall in the second of the last build
    for i in range(6):
        write(os.path.join(d, "in"), b"round %d\n" % i)
        mbexec(service, d, "make", "-s")
        got = mbexec(service, d, "cat", "out")
        if got != "round %d\n" % i:
            stale.append((i, got))
    assert stale == []


def test_touch_then_make_on_the_mount_rebuilds(service, container, mount):
    d = mount.path(unique("touch"))
    os.mkdir(d)
    write(os.path.join(d, "Makefile"), MAKEFILE)
    write(os.path.join(d, "in"), b"one\n")
    mbexec(service, d, "make", "-s")
    for i in range(4):
        os.utime(os.path.join(d, "in"))
        out = mbexec(service, d, "make")
        assert "cp in out" in out, (i, out)


def test_the_sandbox_has_the_mounts_mtime_to_the_nanosecond(service, container, mount):
    d = mount.path(unique("exact"))
    os.mkdir(d)
    f = os.path.join(d, "f")
    write(f, b"exact\n")
    mine = os.stat(f).st_mtime_ns
    sync(mount)
    assert guest_mtime_ns(service, d, "f") == mine
    # and the mount shows the same once the sandbox has it
    assert os.stat(f).st_mtime_ns == mine
    mbexec(service, d, "true")   # the command's invalidate: asked again
    assert os.stat(f).st_mtime_ns == mine


def test_rsync_keeps_directory_and_file_times_on_the_sandbox(service, container, mount, tmp_path):
    src = tmp_path / "src"
    for i in range(20):
        d = src / ("d%02d" % i)
        (d / "sub").mkdir(parents=True)
        for j in range(3):
            (d / ("f%d" % j)).write_bytes(b"%d %d\n" % (i, j))
            os.utime(d / ("f%d" % j), ns=(0, (1600002000 + i) * 10**9 + 5000 + j))
        (d / "sub" / "g").write_bytes(b"g\n")
        os.utime(d / "sub", ns=(0, (1600000000 + i) * 10**9 + 250000000))
        os.utime(d, ns=(0, (1600001000 + i) * 10**9 + 750000000))
    dst = mount.path(unique("rsync"))
    subprocess.run(["rsync", "-a", str(src) + "/", dst + "/"], check=True)
    sync(mount)
    got = {}
    for line in mbexec(service, dst, "find", ".", "-mindepth", "1", "-printf", "%p %T@\\n").splitlines():
        p, t = line.rsplit(" ", 1)
        sec, frac = t.split(".")
        got[p[2:]] = int(sec) * 10**9 + int(frac[:9].ljust(9, "0"))
    want = {os.path.relpath(os.path.join(dp, n), src): os.stat(os.path.join(dp, n)).st_mtime_ns
            for dp, ds, fs in os.walk(src) for n in ds + fs}
    assert got == want
    # and the mount shows them so, also once it asks again (a second rsync
    # finds nothing to do)
    mbexec(service, dst, "true")
    shown = {os.path.relpath(os.path.join(dp, n), dst): os.stat(os.path.join(dp, n)).st_mtime_ns
             for dp, ds, fs in os.walk(dst) for n in ds + fs}
    assert shown == want
    again = subprocess.run(["rsync", "-ai", str(src) + "/", dst + "/"], check=True,
                           capture_output=True, text=True)
    # (the top directory itself, new and queued when rsync set its time,
    # may show another time once it lands: a known defect, issue 18)
    assert [l for l in again.stdout.splitlines() if not l.endswith(" ./")] == [], again.stdout


def test_a_time_set_on_a_file_on_the_sandbox_shows_exactly(service, container, mount):
    d = mount.path(unique("settime"))
    os.mkdir(d)
    f = os.path.join(d, "f")
    write(f, b"on the sandbox\n")
    sync(mount)
    t = 1600000000 * 10**9 + 123456789
    os.utime(f, ns=(t, t))
    assert os.stat(f).st_mtime_ns == t          # queued: the overlay's
    sync(mount)
    assert guest_mtime_ns(service, d, "f") == t
    mbexec(service, d, "true")                  # asked again
    assert os.stat(f).st_mtime_ns == t


def test_reading_a_tree_waits_for_none_of_its_queued_times(service, container, mount):
    """Times set here go in a batch a moment later. A read of the tree
    while that batch has no answer yet (grep -r and ls -lR, which take the
    bulk read, and stat) shows the new times and sends or waits for
    nothing of it: a read never changes the sandbox."""
    from test_mbfs_helpers import invalidate, sh
    name = unique("qtimes")
    rd = "/workspace/" + name
    sh(service, container, "mkdir -p %s/sub && cd %s && for i in $(seq 1 30); do "
       "echo hello $i > f$i; echo x > sub/g$i; done" % (rd, rd))
    invalidate(mount)
    then = 978307200
    os.stat(mount.path(name, "sub"))   # listed (an exec) before the fault
    # the times' batch is the next exec: its answer is held
    service.fault(route="POST /containers/exec", count=1, heldMs=45000)
    try:
        os.utime(mount.path(name, "f1"), (then, then))
        os.utime(mount.path(name, "sub"), (then, then))
        deadline = time.monotonic() + 40
        while service.held() < 1:
            assert time.monotonic() < deadline, "the times' batch never left"
            time.sleep(0.05)
        invalidate(mount)     # cold: the reads below take the bulk read
        r = subprocess.run(["grep", "-r", "hello 7", mount.path(name)], capture_output=True,
                           timeout=30)
        assert r.returncode == 0, r
        subprocess.run(["ls", "-lR", mount.path(name)], check=True, capture_output=True, timeout=30)
        assert os.stat(mount.path(name, "f1")).st_mtime == then
        assert os.stat(mount.path(name, "sub")).st_mtime == then
        assert service.held() == 1      # still held: nothing waited for it
    finally:
        service.release_held()
    sync(mount)
    assert sh(service, container, "stat -c %%Y %s/f1 %s/sub" % (rd, rd)) == "%d\n%d\n" % (then, then)


def test_a_time_a_command_sets_shows_to_the_nanosecond(service, container, mount):
    """The list and stat routes give whole seconds; after a command the
    mount lists again what it held with the guest's own find, which has
    the nanoseconds."""
    d = mount.path(unique("cmdtime"))
    os.makedirs(os.path.join(d, "sub"))
    write(os.path.join(d, "sub", "f"), b"x\n")
    sync(mount)
    assert os.listdir(os.path.join(d, "sub")) == ["f"]
    t = 1600000000 * 10**9 + 123456789
    mbexec(service, d, "sh", "-c", "echo n > sub/g; touch -d @1600000000.123456789 sub/f sub")
    assert os.stat(os.path.join(d, "sub", "f")).st_mtime_ns == t
    assert os.stat(os.path.join(d, "sub")).st_mtime_ns == t
    assert os.stat(os.path.join(d, "sub", "g")).st_mtime_ns == \
        guest_mtime_ns(service, d, "sub/g")


def test_make_on_the_mount_sees_a_source_a_command_changed_in_the_same_second(
        service, container, mount):
    """A source saved at S.4 and its target built at S.5 on the mount, the
    source changed by a command at S.6: make on the mount rebuilds. With
    the list route's whole second the mount kept S.4 for the source (the
    finer time it knew in that second), and make said "up to date"."""
    d = mount.path(unique("samesec"))
    os.mkdir(d)
    write(os.path.join(d, "Makefile"), MAKEFILE)
    write(os.path.join(d, "in"), b"one\n")
    r = subprocess.run(["make", "-s", "-C", d], capture_output=True, timeout=60)
    assert r.returncode == 0, r
    s = int(time.time()) - 60
    os.utime(os.path.join(d, "in"), ns=(s * 10**9 + 400000000,) * 2)
    os.utime(os.path.join(d, "out"), ns=(s * 10**9 + 500000000,) * 2)
    sync(mount)
    mbexec(service, d, "sh", "-c", "echo two > in && touch -d @%d.6 in" % s)
    r = subprocess.run(["make", "-C", d], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "cp in out" in r.stdout, r
    with open(os.path.join(d, "out"), "rb") as f:
        assert f.read() == b"two\n"


def test_times_a_command_sets_show_exactly_whole_seconds_and_before_1970(
        service, container, mount):
    """find gives the second, then the nanoseconds after it (0.25 s before
    1970 is -1.75), and an exact whole second is a time of its own, not
    the list route's whole second that keeps the finer time known."""
    d = mount.path(unique("exact"))
    os.mkdir(d)
    write(os.path.join(d, "f"), b"x\n")
    sync(mount)
    os.listdir(d)
    s = 1600000000
    mbexec(service, d, "touch", "-d", "@%d.4" % s, "f")
    assert os.stat(os.path.join(d, "f")).st_mtime_ns == s * 10**9 + 400000000
    mbexec(service, d, "touch", "-d", "@%d" % s, "f")
    assert os.stat(os.path.join(d, "f")).st_mtime_ns == s * 10**9
    mbexec(service, d, "touch", "-d", "@-0.25", "f")
    assert os.stat(os.path.join(d, "f")).st_mtime_ns == -250000000


def test_a_rename_that_fails_keeps_the_time_queued_for_its_directory(service, container, mount):
    """A rename whose target's queued mkdir fails on the sandbox fails and
    changes nothing: the time set on the source's directory
    meanwhile, queued behind a file in it, still lands."""
    top = mount.path(unique("fail"))
    p, q, h = (os.path.join(top, x) for x in ("P", "Q", "H"))
    for x in (top, p, p + "/sub", q, h):
        os.mkdir(x)
    sync(mount)
    rel = "/workspace/" + os.path.relpath(top, mount.mountpoint)
    hold_writeback(service, mount, h, held_ms=3000)   # what follows waits
    write_file(p + "/f", b"f\n")
    os.utime(p, (1000000000, 1000000000))
    os.mkdir(q + "/N")
    sh(service, container, "rmdir %s/Q" % rel)   # the queued mkdir will fail
    # EIO when the rename waits for the mkdir, ENOENT when it lands first
    with pytest.raises(OSError) as e:
        os.rename(p + "/sub", q + "/N/sub")
    assert e.value.errno in (errno.EIO, errno.ENOENT)
    with pytest.raises(OSError):
        sync(mount)   # the failed mkdir is said
    assert sh(service, container, "stat -c %%Y %s/P; ls %s/P" % (rel, rel)) == "1000000000\nf\nsub\n"


def test_times_stay_exact_across_a_remount(service, container, need_fuse):
    """Files saved through one mount show the same nanoseconds through the
    next: a cold ls lists through the guest (relist.h), not the list
    route's whole seconds, so make and rsync -a see what they saw."""
    top = unique("remount")
    m = mbtest.Mount(service, container)
    try:
        d = m.path(top)
        os.mkdir(d)
        for i in range(3):
            write_file(os.path.join(d, "f%d" % i), b"x" * i)
        os.utime(os.path.join(d, "f1"), ns=(1500000000123456789, 1500000000123456789))
        sync(m)
        before = {n: os.lstat(os.path.join(d, n)).st_mtime_ns for n in os.listdir(d)}
    finally:
        m.unmount()
    assert before["f1"] == 1500000000123456789
    assert any(t % 1000000000 for t in before.values() if t != before["f1"])
    m = mbtest.Mount(service, container)
    try:
        d = m.path(top)
        assert {n: os.lstat(os.path.join(d, n)).st_mtime_ns for n in os.listdir(d)} == before
    finally:
        m.unmount()


def test_make_after_a_remount_sees_a_source_newer_within_the_second(service, container, need_fuse):
    """A fresh mount's lookups in a directory it has not listed (make stats
    its target and sources, it reads no directory) show the sandbox's
    nanoseconds: the directory is listed through the guest, not the list
    route, whose whole seconds would make a source saved 0.5 s after its
    target look as old, and make say "up to date"."""
    top = unique("mkcold")
    rd = "/workspace/" + top
    sh(service, container, "mkdir -p %s/sub && cd %s/sub && printf 'out: src\\n\\tcp src out\\n' > Makefile && "
       "echo v1 > out && echo v2 > src && touch -d @1700000000.25 out && touch -d @1700000000.75 src"
       % (rd, rd))
    m = mbtest.Mount(service, container)
    try:
        d = m.path(top, "sub")
        assert os.lstat(os.path.join(d, "src")).st_mtime_ns == 1700000000750000000
        assert os.lstat(os.path.join(d, "out")).st_mtime_ns == 1700000000250000000
        r = subprocess.run(["make", "-q", "-C", d], capture_output=True, timeout=60)
        assert r.returncode == 1, r   # out is older than src: not up to date
        # what the lookups listed is what ls shows
        assert {n: os.lstat(os.path.join(d, n)).st_mtime_ns % 1000000000 for n in os.listdir(d)
                if n != "Makefile"} == {"src": 750000000, "out": 250000000}
    finally:
        m.unmount()
