"""File times travel exactly: a file written through the mount gets the
mount's mtime on the sandbox to the nanosecond (a whole second could be
older than what a build made from it earlier in that second), and the
mount's own mtime does not step back once the sandbox has the file. So
`mbexec make` right after an edit, and `touch` then make, rebuild."""
import os

import mbtest
from test_mbfs_helpers import sync, unique

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
