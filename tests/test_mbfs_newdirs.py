"""Directories made through the mount travel in write-back batches: mkdir
returns at once, the mount shows the directory (and what is written in it)
until the batch makes it on the sandbox before the files in it, a mode or
time set meanwhile travels too, anything that needs it on the sandbox sends
it first, a failure keeps the files and is reported, and mbexec sees it.

Tests that need a directory to stay queued hold the queue with a first
batch that the service answers slowly (one batch is in flight at a time):
no timing is asserted."""
import errno
import os
import re
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import (control, finish, guest_tree_digest, hold_writeback, read_file,
                               requests_of, sh, status, tree_digest, unique, write_file)

PUT = "PUT /containers/files"
EXEC = "POST /containers/exec"
MKDIR = "POST /containers/files/mkdir"
CHMOD = "PATCH /containers/files/chmod"


pytestmark = pytest.mark.usefixtures("no_faults_left")


def wait(m):
    return status(m, "--wait")


def landed_dir(m, prefix):
    """A new directory made through m, once it is on the sandbox: (its
    path, its guest path)."""
    d = m.path(unique(prefix))
    os.mkdir(d)
    r = wait(m)
    assert r.returncode == 0, (r, m.log())
    return d, "/workspace/" + os.path.relpath(d, m.mountpoint)


def held_dir(service, m, prefix, held_ms=45000):
    """landed_dir, then the write-back queue held behind its slow first
    batch (d/blocker): what follows stays queued (hold_writeback)."""
    d, rd = landed_dir(m, prefix)
    hold_writeback(service, m, d, held_ms)
    return d, rd


def absent(service, container, rpath):
    return sh(service, container, "test -e '%s' || echo absent" % rpath) == "absent\n"


def test_a_tree_of_new_directories_travels_in_the_batch(service, container, wb):
    d, rd = landed_dir(wb, "tree")
    service.reset_stats()
    hold_writeback(service, wb, d)          # d/blocker held in flight
    os.makedirs(os.path.join(d, "a", "b", "c"))
    os.mkdir(os.path.join(d, "x"), 0o750)
    for sub in ("a", "a/b", "a/b/c", "x"):
        for i in range(3):
            write_file(os.path.join(d, sub, "f%d" % i), b"%s %d\n" % (sub.encode(), i))
    os.chmod(os.path.join(d, "a", "b"), 0o700)   # still queued: goes with its mkdir
    os.chmod(d, 0o751)                          # on the sandbox: queued behind
    os.utime(os.path.join(d, "a"), (1300000000, 1300000000))
    # the mount shows all of it at once, before the sandbox has any of it
    assert absent(service, container, rd + "/a")
    assert sorted(os.listdir(d)) == ["a", "blocker", "x"]
    assert sorted(os.listdir(os.path.join(d, "a", "b"))) == ["c", "f0", "f1", "f2"]
    assert read_file(os.path.join(d, "a", "b", "c", "f2")) == b"a/b/c 2\n"
    assert os.stat(os.path.join(d, "x")).st_mode & 0o777 == 0o750
    assert os.stat(os.path.join(d, "a", "b")).st_mode & 0o777 == 0o700
    assert os.stat(d).st_mode & 0o777 == 0o751
    assert os.stat(os.path.join(d, "a")).st_mtime == 1300000000
    assert control(wb)["writeback"]["pendingFiles"] >= 12
    assert control(wb)["writeback"]["pendingDirs"] == 4
    r = status(wb)
    assert " and 4 new directories, " in r.stdout, r.stdout
    r = wait(wb)
    assert r.returncode == 0, (r, wb.log())
    assert guest_tree_digest(service, container, rd) == tree_digest(d)
    out = sh(service, container, "cd '%s' && stat -c '%%n %%a' . a/b x && stat -c %%Y a" % rd)
    assert out.split() == [".", "751", "a/b", "700", "x", "750", "1300000000"]
    assert os.stat(os.path.join(d, "a")).st_mtime == 1300000000
    # no mkdir or chmod of their own: the held batch, this one, the
    # utime batch's touch (batch.h), the test's three commands
    assert requests_of(service, MKDIR) == 0, service.stats()
    assert requests_of(service, CHMOD) == 0, service.stats()
    assert requests_of(service, PUT) <= 2, service.stats()
    assert requests_of(service, EXEC) <= 6, service.stats()


def test_what_needs_a_new_directory_on_the_sandbox_sends_it_first(service, container, wb):
    d, rd = held_dir(service, wb, "needs", held_ms=5000)   # its symlink waits for it
    # a rename of a queued directory, a symlink and a large file in one
    # wait for its mkdir; a file renamed inside one does not
    t = os.path.join(d, "t")
    os.mkdir(t)
    write_file(os.path.join(t, "tmp"), b"saved\n")
    os.rename(os.path.join(t, "tmp"), os.path.join(t, "f"))
    os.rename(t, os.path.join(d, "u"))
    os.mkdir(os.path.join(d, "l"))
    os.symlink("../u/f", os.path.join(d, "l", "link"))
    os.mkdir(os.path.join(d, "big"))
    big = os.urandom(300 * 1024)                 # past a batch: uploaded at close
    write_file(os.path.join(d, "big", "data"), big)
    os.mkdir(os.path.join(d, "e"))
    os.rmdir(os.path.join(d, "e"))
    assert sorted(os.listdir(d)) == ["big", "blocker", "l", "u"]
    r = wait(wb)
    assert r.returncode == 0, (r, wb.log())
    out = sh(service, container, "cd '%s' && ls -A && ls -A u && cat l/link && readlink l/link" % rd)
    assert out.split() == ["big", "blocker", "l", "u", "f", "saved", "../u/f"]
    assert guest_tree_digest(service, container, rd) == tree_digest(d)


def test_mbexec_sees_directories_made_before_it(service, container, wb):
    d, _ = held_dir(service, wb, "seen")
    os.makedirs(os.path.join(d, "new", "deeper"))
    write_file(os.path.join(d, "new", "deeper", "f"), b"x\n")
    p = mbtest.run_mbexec(service, ["cat", "deeper/f"], cwd=os.path.join(d, "new"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"x\n"


@pytest.mark.parametrize("theirs", ["file", "dir"])
def test_a_name_taken_on_the_sandbox_meanwhile_keeps_the_files_and_says_so(service, container, wb,
                                                                          theirs):
    """Another client takes the new directory's name before the batch
    lands: with a file, or with a directory of its own, which is never
    taken over (their mode stays, our files do not land among theirs)."""
    d, rd = held_dir(service, wb, "refused")
    sub = os.path.join(d, "sub")
    os.mkdir(sub)
    data = b"must not be lost\n"
    write_file(os.path.join(sub, "t"), data)
    if theirs == "file":
        sh(service, container, "echo theirs > '%s/sub'" % rd)
    else:
        sh(service, container, "mkdir -m 711 '%s/sub' && echo theirs > '%s/sub/t'" % (rd, rd))
    r = wait(wb)
    assert r.returncode == 1, (r, wb.log())
    log = wb.log()
    assert "cannot make the directory '/%s/sub'" % os.path.relpath(d, wb.mountpoint) in log, log
    kept = re.findall(r"upload of '%s/sub/t' failed.*data kept in (\S+)" % re.escape(rd), log)
    assert kept and read_file(kept[0]) == data, log
    assert [k["path"] for k in control(wb)["kept"]] == [rd + "/sub/t"]
    assert wait(wb).returncode == 0          # reported once
    # the sandbox's stands, and the mount shows it
    if theirs == "file":
        assert sh(service, container, "cat '%s/sub'" % rd) == "theirs\n"
        assert read_file(sub) == b"theirs\n"
    else:
        assert sh(service, container, "stat -c %%a '%s/sub' && cat '%s/sub/t'" % (rd, rd)) == \
            "711\ntheirs\n"
        assert os.listdir(sub) == ["t"]
        assert read_file(os.path.join(sub, "t")) == b"theirs\n"


def test_a_symlink_put_in_a_directorys_place_keeps_the_queued_mode_and_time(service, container, wb):
    d, rd = landed_dir(wb, "swapped")
    os.mkdir(os.path.join(d, "D"))
    assert wait(wb).returncode == 0
    victim = "/tmp/%s" % unique("victim")
    sh(service, container, "mkdir -m 755 %s && touch -d @1000000000 %s" % (victim, victim))
    hold_writeback(service, wb, d)
    write_file(os.path.join(d, "D", "f"), b"x\n")   # queued behind: D's mode and time wait
    os.chmod(os.path.join(d, "D"), 0o700)
    os.utime(os.path.join(d, "D"), (1300000000, 1300000000))
    sh(service, container, "rm -rf '%s/D' && ln -s %s '%s/D'" % (rd, victim, rd))
    wait(wb)
    # nothing went through it: D's file is kept instead
    assert sh(service, container, "stat -c '%%a %%Y' %s && ls -A %s" % (victim, victim)).split() == \
        ["755", "1000000000"]
    assert [k["path"] for k in control(wb)["kept"]] == [rd + "/D/f"]


def test_renaming_a_directory_that_could_not_be_made_says_eio(service, container, wb):
    d, _ = landed_dir(wb, "unmade")
    # a definite refusal of every batch (a full /tmp on the sandbox; a
    # batch of names only comes in its command: refused too)
    service.fault(route=PUT, count=100, match="wb-", status=403, error="file_access_denied")
    service.fault(route="POST /containers/exec", count=100, status=403, error="forbidden")
    q = os.path.join(d, "q")
    os.mkdir(q)
    write_file(os.path.join(q, "f"), b"kept\n")
    with pytest.raises(OSError) as e:
        os.rename(q, os.path.join(d, "q2"))
    assert e.value.errno == errno.EIO
    service.clear_faults()
    assert wait(wb).returncode == 1
    assert [k["path"] for k in control(wb)["kept"]] == \
        ["/workspace/%s/q/f" % os.path.relpath(d, wb.mountpoint)]


def test_a_new_directory_in_a_setgid_one_shows_setgid(service, container, wb):
    d, rd = landed_dir(wb, "sgid")
    os.chmod(d, 0o2775)
    assert wait(wb).returncode == 0
    os.mkdir(os.path.join(d, "inner"), 0o755)
    assert os.stat(os.path.join(d, "inner")).st_mode & 0o7777 == 0o2755
    wait(wb)
    assert sh(service, container, "stat -c %%a '%s/inner'" % rd) == "2755\n"


def test_kill9_with_a_queued_directory_loses_nothing(service, container, need_fuse, tmp_path):
    cache = str(tmp_path / "cache")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    try:
        d, _ = landed_dir(m, "crash-dir")
        name = os.path.basename(d)
        # every batch fails for now, as a transient fault: all stays queued
        service.fault(route=PUT, count=100000, match="wb-", status=503, error="files_unavailable")
        os.makedirs(os.path.join(d, "a", "b"))
        write_file(os.path.join(d, "a", "b", "f"), b"deep\n")
        write_file(os.path.join(d, "a", "g"), b"shallow\n")
    finally:
        m.proc.send_signal(9)
        m.proc.wait(30)
        subprocess.run(["fusermount3", "-uz", m.mountpoint], capture_output=True)
        m.unmount()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    service.clear_faults()
    assert absent(service, container, "/workspace/%s/a" % name)
    # the next mount uploads the files where they were written
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    log = finish(m2)
    assert sh(service, container, "cd /workspace/%s && cat a/b/f a/g" % name) == "deep\nshallow\n", log


@pytest.mark.parametrize("make", ["mkdir", "symlink"])
def test_a_name_looked_up_in_a_renamed_directory_can_be_made(service, container, wb, make):
    """mkdir a && ls a/c; mv a d && mkdir d/c: the missing c the kernel
    remembered under a is no stale handle under d."""
    top = wb.path(unique("movedneg"))
    os.mkdir(top)
    a, d = os.path.join(top, "a"), os.path.join(top, "d")
    os.mkdir(a)
    assert not os.path.exists(os.path.join(a, "c"))
    os.rename(a, d)
    if make == "mkdir":
        os.mkdir(os.path.join(d, "c"))
        assert os.path.isdir(os.path.join(d, "c"))
    else:
        os.symlink("target", os.path.join(d, "c"))
        assert os.readlink(os.path.join(d, "c")) == "target"
    assert status(wb, "--wait").returncode == 0
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    assert sh(service, container, "ls -A %s" % rel) == "c\n"
