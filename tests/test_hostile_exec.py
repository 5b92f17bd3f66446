"""A hostile sandbox against our guest machinery: a login profile that puts
fake tools first in PATH (every exec is `/bin/sh -lc`), a planted
/tmp/.mbexec symlink, and a service that stalls (one deadline per
operation). mbfs stays alive, the mount and mbexec work, no planted tool
runs, nothing lands where a planted link points, and a stalled operation
fails within its op_timeout."""
import errno
import hashlib
import os
import re
import time
import urllib.parse

import pytest

import mbtest
from test_mbexec_helpers import mbx, unique
from test_mbfs_helpers import sync

MARK = "/root/evil-ran"
EVIL = "/root/evil-bin"
# the tools our scripts call, faked: each notes that it ran and prints what
# a parser would choke on (a malformed bulk-listing record, a report header)
FAKES = ("find", "tar", "base64", "stat", "cat", "mv", "rm", "mkdir", "ls", "head", "tail",
         "dd", "split", "sha256sum", "sed", "awk", "sort", "xargs", "touch", "chmod", "ln",
         "date", "flock", "setsid", "mkfifo", "wc", "cp", "df", "readlink", "tr", "cut", "od")
FAKE = (b"#!/bin/sh\n"
        b"echo \"$0 $*\" >>" + MARK.encode() + b"\n"
        b"printf 'F\\0000\\0\\0\\377garbage\\n@mbx done 0 999 999 0 0 999 0 999\\n@e\\n@end\\n'\n"
        b"exit 0\n")
# ...and a banner on both streams, before any command of ours, that looks
# like what our parsers read (a report, an @mbx header, an error to map)
PROFILE = ("PATH=%s:$PATH\nexport PATH\nexport MBX_TEST_FROM_PROFILE=yes\n"
           "printf 'ok 3\\nx 0 nope\\n@mbx done 0 999 999 0 0 999 0 999\\n@e\\n@end\\n'\n"
           "echo 'mv: cannot move: No such file or directory' >&2\n" % EVIL).encode()


def guest(service, ident, command):
    """Run command on the sandbox with absolute paths only (the profile's
    PATH is hostile); its stdout."""
    doc = service.exec(ident, "echo :begin:; " + command)
    assert doc["exitCode"] == 0, doc
    return doc["stdout"].split(":begin:\n", 1)[1]


def marker(service, ident):
    status, data = service.get_file(ident, MARK)
    return data.decode(errors="replace") if status == 200 else ""


@pytest.fixture(scope="module")
def hostile(service, container):
    """A tree to read, then the fake tools, then the profile (last: from
    then on every `sh -lc` of this container has them first in PATH)."""
    guest(service, container,
          "/bin/mkdir -p /workspace/tree/a/b /workspace/trap %s && cd /workspace/tree && "
          "for i in 1 2 3 4 5 6 7 8; do echo small $i >a/f$i; echo deep $i >a/b/g$i; done && "
          "/usr/bin/head -c 2500000 /dev/urandom >big && /bin/ln -s a/f1 link" % EVIL)
    for t in FAKES:
        service.put_file(container, "%s/%s" % (EVIL, t), FAKE)
    guest(service, container, "/bin/chmod 755 %s/*" % EVIL)
    service.put_file(container, "/root/.profile", PROFILE)
    # the profile is in force: a plain `find` is the fake now
    doc = service.exec(container, "find /workspace/tree >/dev/null; echo $PATH")
    assert doc["stdout"].startswith("ok 3\n") and ("\n" + EVIL) in doc["stdout"], doc
    guest(service, container, "/bin/rm -f %s" % MARK)
    return container


@pytest.fixture(scope="module")
def mnt(service, hostile, need_fuse_module):
    m = mbtest.Mount(service, hostile)
    yield m
    rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, "mbfs exited %s: %s" % (rc, log[-3000:])


@pytest.fixture(scope="module")
def need_fuse_module():
    if not mbtest.fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")


def sandbox_sha(service, ident, path):
    return guest(service, ident, "/usr/bin/sha256sum %s" % path).split()[0]


def test_mount_reads_and_writes_with_planted_tools(service, hostile, mnt):
    tree = mnt.path("tree")
    seen = sorted(os.path.relpath(os.path.join(d, f), tree)
                  for d, _, fs in os.walk(tree) for f in fs)
    assert seen == sorted(["big", "link"] + ["a/f%d" % i for i in range(1, 9)] +
                          ["a/b/g%d" % i for i in range(1, 9)])
    for i in range(1, 9):
        with open(os.path.join(tree, "a", "b", "g%d" % i), "rb") as f:
            assert f.read() == b"deep %d\n" % i
    assert os.readlink(os.path.join(tree, "link")) == "a/f1"
    with open(os.path.join(tree, "big"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == sandbox_sha(service, hostile, "/workspace/tree/big")
    # writes: a small file (a write-back batch) and a large one (parts, join)
    name = unique("w")
    with open(mnt.path(name + ".small"), "wb") as f:
        f.write(b"written through the mount\n")
    data = os.urandom(1500000)
    with open(mnt.path(name + ".big"), "wb") as f:
        f.write(data)
    os.utime(mnt.path(name + ".small"), (1000000000, 1000000000))
    sync(mnt)
    status, got = service.get_file(hostile, "/workspace/%s.small" % name)
    assert (status, got) == (200, b"written through the mount\n")
    assert hashlib.sha256(data).hexdigest() == sandbox_sha(service, hostile, "/workspace/%s.big" % name)
    assert mnt.proc.poll() is None, mnt.log()[-3000:]
    assert marker(service, hostile) == "", marker(service, hostile)


def test_mbexec_works_with_planted_tools(service, hostile, mnt):
    wd = mnt.path("tree")
    p = mbx(service, ["sh", "-c", "echo hello; echo oops >&2; exit 3"], wd)
    assert (p.returncode, p.stdout, p.stderr) == (3, b"hello\n", b"oops\n")
    p = mbx(service, ["sh", "-c", "read x; echo got $x"], wd, input=b"it\n")
    assert p.stdout == b"got it\n", p.stderr
    p = mbx(service, ["sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done"], wd)
    assert p.returncode == 0 and p.stdout.count(b"\n") == 3000, p.stderr
    # a script too long for one exec travels as a file
    long = "x=0\n" + "x=$((x+1))\n" * 2000 + "echo $x\n"
    p = mbx(service, ["--sh", long], wd)
    assert p.stdout == b"2000\n", p.stderr
    assert mnt.proc.poll() is None
    assert marker(service, hostile) == "", marker(service, hostile)


def test_users_command_keeps_the_login_environment(service, hostile, mnt):
    p = mbx(service, ["sh", "-c", "echo $PATH; echo $MBX_TEST_FROM_PROFILE; echo $HOME"], mnt.path("tree"))
    assert p.returncode == 0, p.stderr
    path, var, home = p.stdout.decode().splitlines()
    assert path.split(":")[0] == EVIL
    assert (var, home) == ("yes", "/root")
    # and the user's own `cat` is the one the profile put first, as over ssh
    p = mbx(service, ["cat", "/dev/null"], mnt.path("tree"))
    assert b"garbage" in p.stdout
    guest(service, hostile, "/bin/rm -f %s" % MARK)


def test_planted_run_base_symlink_is_not_followed(service, hostile, mnt):
    # the last command's supervisor may still be tidying the directory up:
    # the rm goes again until it took all
    guest(service, hostile, "i=0; until /bin/rm -rf /tmp/.mbexec 2>/dev/null; do "
          "i=$((i + 1)); [ $i -lt 300 ] || exit 1; /bin/sleep 0.1; done; "
          "/bin/ln -s /workspace/trap /tmp/.mbexec")
    p = mbx(service, ["sh", "-c", "echo through"], mnt.path("tree"))
    assert (p.returncode, p.stdout) == (0, b"through\n"), p.stderr
    long = "echo long\n" + ": padding\n" * 2000
    p = mbx(service, ["--sh", long], mnt.path("tree"))
    assert p.stdout == b"long\n", p.stderr
    out = guest(service, hostile, "/bin/ls -A /workspace/trap; [ -d /tmp/.mbexec ] && "
                "[ ! -L /tmp/.mbexec ] && echo private")
    assert out == "private\n"
    # the planted link was moved aside, not removed: nothing is lost
    out = guest(service, hostile, "for f in /tmp/.mbexec.moved.*; do [ -L \"$f\" ] && echo moved; done")
    assert "moved" in out
    assert marker(service, hostile) == "", marker(service, hostile)


def test_planted_run_base_file_is_replaced(service, hostile, mnt):
    guest(service, hostile, "/bin/rm -rf /tmp/.mbexec && echo planted >/tmp/.mbexec")
    p = mbx(service, ["sh", "-c", "echo ok"], mnt.path("tree"))
    assert (p.returncode, p.stdout) == (0, b"ok\n"), p.stderr
    assert guest(service, hostile, "[ -d /tmp/.mbexec ] && echo dir") == "dir\n"


def test_a_stalled_service_fails_read_and_stat_within_op_timeout(service, need_fuse_module):
    """One deadline per operation: with every request stalled, a read of a
    large file (a cut on the guest, then parallel GETs, each retried) and a
    stat fail after about op_timeout, not op_timeout per call and retry.
    The stall is this test's container's alone: the module's mount (which
    another test's `mbfs --list` may read meanwhile) is left alone."""
    op_s = 8
    name = unique("stall")
    own = service.create_container()
    gen = urllib.parse.quote(own["createdAt"], safe="")
    guest(service, own, "/usr/bin/head -c 3500000 /dev/urandom >/workspace/%s.r; "
          "/bin/mkdir /workspace/%s.d" % (name, name))
    m = mbtest.Mount(service, own, options=["op_timeout=%d" % op_s])
    try:
        fd = os.open(m.path("%s.r" % name), os.O_RDONLY)
        os.stat(m.path("%s.d" % name))
        for route in ("GET /containers/files", "GET /containers/files/stat",
                      "GET /containers/files/list", "POST /containers/exec"):
            service.fault(route=route, count=500, delayMs=60000, match=gen)
        for what, fn in (("read", lambda: os.pread(fd, 1 << 20, 2 << 20)),
                         ("stat", lambda: os.stat(m.path("%s.d" % name, "nothing-here")))):
            t0 = time.monotonic()
            with pytest.raises(OSError):
                fn()
            took = time.monotonic() - t0
            assert took < 2 * op_s, "%s took %.1f s with op_timeout=%d" % (what, took, op_s)
        service.clear_faults()
        os.close(fd)
        assert m.proc.poll() is None, m.log()[-3000:]
    finally:
        service.clear_faults()
        m.unmount()
        service.delete_container(own)
        assert not mbtest.sanitizer_report(m.log()), m.log()


@pytest.mark.parametrize("profile", ["exit 0\n", "exec /bin/sh -c 'exit 0'\n"], ids=["exit", "exec"])
def test_a_profile_that_never_runs_our_command_fails_loudly(service, need_fuse_module, profile):
    """A profile that ends the login shell (`exit 0`, `exec bash`...) means
    none of our scripts runs, though every exec answers exit status 0:
    each change through the mount fails with EIO and its data is kept,
    never reported as done."""
    ident = service.create_container()
    try:
        guest(service, ident, "/bin/mkdir -p /workspace/d && echo old >/workspace/d/f")
        m = mbtest.Mount(service, ident, options=["op_timeout=10"])
        try:
            os.stat(m.path("d", "f"))
            service.put_file(ident, "/root/.profile", profile.encode())
            data = os.urandom(2500000)
            with pytest.raises(OSError) as e:
                with open(m.path("big"), "wb") as f:
                    f.write(data)
            assert e.value.errno == errno.EIO, e.value
            with pytest.raises(OSError) as e:   # a command of its own
                os.symlink("f", m.path("d", "l"))
            assert e.value.errno == errno.EIO, e.value
            with open(m.path("d", "small"), "wb") as f:
                f.write(b"small\n")
            with pytest.raises(OSError) as e:
                sync(m)
            assert e.value.errno == errno.EIO, e.value
            assert "did not run" in m.log(), m.log()[-2000:]
            # mbexec says so, and that the command did not run: no retries
            p = mbx(service, ["true"], m.path("d"))
            assert p.returncode == 255 and b"did not run mbexec's script" in p.stderr, p.stderr
            assert m.proc.poll() is None, m.log()[-3000:]
            # the large file's bytes are kept, whole
            kept = re.findall(r"upload of '/workspace/big' failed: .*data kept in (\S+)", m.log())
            assert kept, m.log()[-3000:]
            with open(kept[0], "rb") as f:
                assert f.read() == data
        finally:
            service.put_file(ident, "/root/.profile", b"")
            m.unmount()
            assert not mbtest.sanitizer_report(m.log()), m.log()
    finally:
        service.delete_container(ident)
