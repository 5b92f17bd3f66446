"""Disconnected operation: with the service gone silent for longer than
op_timeout, write-back keeps every change queued, in order (nothing goes
to kept/, every close() and mkdir that returned 0 holds), fsync says EIO
while it waits, and it all reaches the sandbox once the service answers;
an unmount meanwhile leaves it in the journal for the next mount."""
import errno
import os
import signal
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import control, hold_writeback, read_file, sh, status, unique, until, write_file


@pytest.fixture
def svc(need_fuse):
    """A service of this test's own: it is frozen (SIGSTOP) in the test."""
    s = mbtest.Service()
    yield s
    mbtest.thaw(s.proc.pid)
    s.stop()


def kept_files(cache):
    return [f for _, _, fs in os.walk(os.path.join(cache, "kept")) for f in fs]


def edit_during_outage(m, d):
    """Files and directories made while the service is silent."""
    for i in range(10):
        write_file(os.path.join(d, "f%d" % i), b"offline %d\n" % i)
    os.mkdir(os.path.join(d, "sub"))
    write_file(os.path.join(d, "sub", "g"), b"in a new directory\n")
    write_file(os.path.join(d, "f0"), b"offline 0, again\n")


def check_landed(svc, c, rel):
    out = sh(svc, c, "cd %s && cat f0 f9 sub/g && ls | wc -l" % rel)
    assert out == "offline 0, again\noffline 9\nin a new directory\n11\n", out


def test_edits_during_an_outage_longer_than_op_timeout_all_land(svc, tmp_path):
    c = svc.create_container()
    cache = str(tmp_path / "cache")
    m = mbtest.Mount(svc, c, options=["op_timeout=2", "cache_dir=" + cache], writeback=True)
    try:
        name = unique("outage")
        d = m.path(name)
        os.mkdir(d)
        assert status(m, "--wait").returncode == 0
        mbtest.freeze(svc.proc.pid)
        try:
            edit_during_outage(m, d)
            # several tries, each op_timeout long, have failed
            until(lambda: control(m)["writeback"]["retries"] >= 2, "two failed tries", timeout=120)
            wb = control(m)["writeback"]
            assert wb["waiting"] is True and wb["failedFiles"] == 0, wb
            # what the mount knows still answers, from the queue
            assert read_file(os.path.join(d, "sub", "g")) == b"in a new directory\n"
            assert sorted(os.listdir(d)) == ["f%d" % i for i in range(10)] + ["sub"]
            # fsync cannot reach the sandbox: it says so, and keeps the file queued
            fd = os.open(os.path.join(d, "f1"), os.O_WRONLY)
            try:
                with pytest.raises(OSError) as e:
                    os.fsync(fd)
                assert e.value.errno == errno.EIO
            finally:
                os.close(fd)
        finally:
            mbtest.thaw(svc.proc.pid)
        assert status(m, "--wait").returncode == 0
        rel = "/workspace/" + name
        check_landed(svc, c, rel)
        wb = control(m)["writeback"]
        assert wb["waiting"] is False and wb["failedFiles"] == 0, wb
    finally:
        rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, log
    assert "cannot be reached" in log and "answers again" in log, log
    assert kept_files(cache) == []


def test_an_unmount_during_an_outage_leaves_the_changes_to_the_next_mount(svc, tmp_path):
    c = svc.create_container()
    cache = str(tmp_path / "cache")
    opts = ["op_timeout=2", "cache_dir=" + cache]
    m = mbtest.Mount(svc, c, options=opts, writeback=True)
    name = unique("outage-umount")
    try:
        d = m.path(name)
        os.mkdir(d)
        assert status(m, "--wait").returncode == 0
        mbtest.freeze(svc.proc.pid)
        try:
            edit_during_outage(m, d)
            until(lambda: control(m)["writeback"]["retries"] >= 1, "a failed try", timeout=120)
        finally:
            rc = m.unmount()
            mbtest.thaw(svc.proc.pid)
    except BaseException:
        mbtest.thaw(svc.proc.pid)
        raise
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert kept_files(cache) == [], log
    assert "the journal keeps" in log, log
    # the next mount sends them
    m2 = mbtest.Mount(svc, c, options=opts, writeback=True)
    try:
        assert status(m2, "--wait").returncode == 0
        check_landed(svc, c, "/workspace/" + name)
    finally:
        rc2 = m2.unmount()
    assert rc2 == 0, m2.log()
    assert kept_files(cache) == [], m2.log()


def fill(path):
    """Write path until its filesystem is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


@pytest.mark.parametrize("when", ["closing", "queued"])
def test_a_full_cache_disk_loses_nothing_whose_close_returned_0(service, container, need_fuse, tmp_path,
                                                                  when):
    """The cache directory on a small filesystem, filled up while files are
    written: a close() that returned 0 is a file the sandbox gets once
    there is room again; one that could not be kept said so."""
    cache = str(tmp_path / "cache")
    os.mkdir(cache)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", cache], check=True)
    try:
        m = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
        try:
            name = unique("fulldisk")
            d = m.path(name)
            os.mkdir(d)
            assert status(m, "--wait").returncode == 0
            filler = os.path.join(cache, "filler")
            fill(filler)
            # room for a few of the files below, not for all of them
            os.truncate(filler, os.path.getsize(filler) - 96 * 1024)
            closed = {}
            if when == "queued":
                # a first batch held by the service; these wait behind it,
                # and the disk fills before they leave
                os.truncate(filler, 0)
                hold_writeback(service, m, d)
                for i in range(16):
                    data = b"%d\n" % i * 2000
                    write_file(os.path.join(d, "q%02d" % i), data)
                    closed["q%02d" % i] = data
                fill(filler)
                service.release_held()
                until(lambda: control(m)["writeback"]["inFlightFiles"] == 0, "the held batch", timeout=120)
            for i in range(40):
                data = b"%d\n" % i * 2000
                try:
                    write_file(os.path.join(d, "f%02d" % i), data)
                    closed["f%02d" % i] = data
                except OSError as e:
                    assert e.errno in (errno.ENOSPC, errno.EIO), e
            os.unlink(filler)
            assert status(m, "--wait").returncode == 0
            rel = "/workspace/" + name
            # the disk filled before the last f file; some were kept (the
            # 16 queued ones are, whatever room they left when they went)
            made = [n for n in closed if n.startswith("f")]
            assert len(made) < 40 and (made or when == "queued"), (when, len(made))
            for n, data in closed.items():
                assert sh(service, container, "cat %s/%s | wc -c" % (rel, n)) == "%d\n" % len(data), n
        finally:
            rc = m.unmount()
        assert rc == 0, m.log()
        assert kept_files(cache) == [], m.log()
    finally:
        subprocess.run(["umount", "-l", cache])
