"""mbfs under failure: injected faults on reads and writes, a generation
that expires while mounted. Nothing is lost or corrupted, errors surface,
nothing hangs."""
import errno
import os
import re

import pytest

import mbtest
from test_mbfs_helpers import (MiB, close_fails_or_sync_does, control, finish, guest_sha, invalidate,
                               read_file, sh, sha, sync, unique, until, write_file)

GET = "GET /containers/files"
PUT = "PUT /containers/files"


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.mark.parametrize("size", [1000, 3 * MiB + 5])
def test_read_retries_503_and_reset(service, container, mount, size):
    name = unique("flaky")
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (size, name))
    want = guest_sha(service, container, "/workspace/" + name)
    service.fault(route=GET, count=2, status=503, error="files_unavailable")
    service.fault(route=GET, count=1, reset=True, afterBytes=100)
    data = read_file(mount.path(name))
    assert len(data) == size
    assert sha(data) == want


def kept_files(mount_log):
    return re.findall(r"data kept in (\S+)", mount_log)


@pytest.mark.parametrize("writeback", [True, False], ids=["writeback", "sync_close"])
def test_failed_upload_fails_close_and_keeps_data(service, container, need_fuse, writeback):
    """With sync_close close() reports the failure; with write-back close()
    queues the file and the sync reports it (test_mbfs_writeback.py has
    fsync and `mbfs --status --wait`)."""
    m = mbtest.Mount(service, container, writeback=writeback)
    try:
        name = unique("precious")
        write_file(m.path(name), b"old\n")
        sync(m)
        # a definite refusal (a full disk on the sandbox gives this 403); a
        # transient one is retried (test_mbfs_durability.py)
        service.fault(route=PUT, count=3, status=403, error="file_access_denied")
        new = b"new data that must not be lost\n"
        f = open(m.path(name), "wb")
        f.write(new)
        close_fails_or_sync_does(m, f, writeback)
        # the sandbox still has the whole old file, never a mix
        assert sh(service, container, "cat /workspace/" + name) == "old\n"
        log = m.log()
        lines = [l for l in log.splitlines() if "upload of '/workspace/%s' failed" % name in l]
        assert len(lines) == 1, log
        kept = kept_files(lines[0])
        assert kept and read_file(kept[0]) == new
    finally:
        finish(m)


def test_failed_large_upload_keeps_data(service, container, mount):
    name = unique("precious-big")
    service.fault(route=PUT, count=20, match="mbfs-up", status=403, error="file_access_denied")
    data = os.urandom(2 * MiB + 11)
    f = open(mount.path(name), "wb")
    f.write(data)
    with pytest.raises(OSError):
        f.close()
    service.clear_faults()
    out = sh(service, container, "ls -A /workspace; stat -c %s /workspace/" + name + " || true")
    assert ".mbfs-up-" not in out            # no staging left behind
    # a new file reaches the sandbox with its upload: never there, never partial
    assert name not in out.split()
    kept = kept_files(mount.log())
    assert kept and read_file(kept[-1]) == data


def test_fsync_reports_upload_failure(service, container, mount):
    name = unique("fsync")
    service.fault(route=PUT, count=3, status=403, error="file_access_denied")
    fd = os.open(mount.path(name), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"abc")
        with pytest.raises(OSError):
            os.fsync(fd)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


@pytest.mark.parametrize("when", ["before", "after"])
def test_ambiguous_join_is_reconciled(service, container, mount, when):
    # a 503 on the exec that assembles a large upload is ambiguous: mbfs
    # looks at the sandbox (hash) instead of repeating blindly
    name = unique("join")
    data = os.urandom(MiB + 10)
    f = open(mount.path(name), "wb")
    f.write(data)
    service.fault(route="POST /containers/exec", count=1, status=503,
                  error="execution_unavailable", when=when)
    f.close()
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    assert ".mbfs-up-" not in sh(service, container, "ls -A /workspace")


@pytest.mark.parametrize("writeback", [True, False], ids=["writeback", "sync_close"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_ambiguous_put_is_reconciled(service, container, need_fuse, when, writeback):
    """sync_close: close()'s PUT; write-back: the batch's PUT, at the sync."""
    m = mbtest.Mount(service, container, writeback=writeback)
    try:
        name = unique("put")
        f = open(m.path(name), "wb")
        f.write(b"payload")
        service.fault(route=PUT, count=1, status=503, error="files_unavailable", when=when)
        try:
            f.close()
            sync(m)
            closed = True
        except OSError:
            closed = False
        got = sh(service, container, "cat /workspace/%s 2>/dev/null || echo absent" % name)
        # reconciled (read back), then sent again when it had not happened:
        # close() and the sync succeed either way, with the whole new content
        assert closed and got == "payload"
        # the bad answer went to mbfs: this PUT of the test's own gets a good one
        service.put_file(container, "/workspace/" + name + ".probe", b"probe\n")
    finally:
        finish(m)


def test_expired_generation_fails_fast_once(service, need_fuse):
    ident = service.create_container()
    m = mbtest.Mount(service, ident)
    try:
        write_file(m.path("f"), b"x")
        service.expire(ident)
        invalidate(m)
        for _ in range(5):
            with pytest.raises(OSError) as e:
                os.listdir(m.mountpoint)
            assert e.value.errno in (errno.EIO, errno.ENOTCONN)
            with pytest.raises(OSError):
                read_file(m.path("f"))
            with pytest.raises(OSError):
                write_file(m.path("g"), b"y")
        # the control file still answers, so tools can tell which mount it is
        assert b'"id"' in read_file(m.path(".mainbrella"))
    finally:
        rc = m.unmount()
        service.delete_container(ident)
    log = m.log()
    assert rc == 0, log
    assert len([l for l in log.splitlines() if "no longer running" in l]) == 1, log
    assert not mbtest.sanitizer_report(log)


def test_dirty_file_uploaded_at_unmount(service, container, need_fuse):
    m = mbtest.Mount(service, container)
    name = unique("late")
    try:
        f = open(m.path(name), "wb")
        f.write(b"written before unmount\n")
        f.flush()
        f.close()
    finally:
        rc = m.unmount()
    assert rc == 0, m.log()
    assert sh(service, container, "cat /workspace/" + name) == "written before unmount\n"


def test_dead_service_fails_within_bounded_time(need_fuse):
    svc = mbtest.Service()
    try:
        ident = svc.create_container()
        m = mbtest.Mount(svc, ident, options=["op_timeout=5"])
        try:
            write_file(m.path("f"), b"x")
            svc.stop()                # its sandboxes go with it
            invalidate(m)
            with pytest.raises(OSError):
                os.listdir(m.mountpoint)
            with pytest.raises(OSError):
                write_file(m.path("g"), b"y")
        finally:
            rc = m.unmount()
        assert rc == 0, m.log()
        assert not mbtest.sanitizer_report(m.log())
    finally:
        svc.stop()


def test_sigterm_uploads_open_dirty_file(service, container, need_fuse):
    m = mbtest.Mount(service, container)
    name = unique("term")
    fd = os.open(m.path(name), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"dirty at shutdown\n")
        m.proc.terminate()            # destroy() uploads what is still dirty
        assert m.proc.wait(60) == 0
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
        m.unmount()
    assert not mbtest.sanitizer_report(m.log())
    assert sh(service, container, "cat /workspace/" + name) == "dirty at shutdown\n"


def test_ambiguous_exec_namespace_ops_are_reconciled(service, container, mount):
    # the command ran but the answer was lost: the outcome is read back
    d = mount.path(unique("amb"))
    os.mkdir(d)
    write_file(os.path.join(d, "a"), b"A")
    write_file(os.path.join(d, "b"), b"B")
    sync(mount)     # a and b are on the sandbox: their batch's command is not the one faulted
    service.fault(route="POST /containers/exec", count=1, status=503,
                  error="execution_unavailable", when="after")
    os.symlink("a", os.path.join(d, "link"))
    assert os.readlink(os.path.join(d, "link")) == "a"
    service.fault(route="POST /containers/exec", count=1, status=503,
                  error="execution_unavailable", when="after")
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))   # replaces b: mv -fT
    assert read_file(os.path.join(d, "b")) == b"A"
    assert not os.path.exists(os.path.join(d, "a"))
    service.fault(route="POST /containers/exec", count=1, status=503,
                  error="execution_unavailable", when="before")
    with pytest.raises(OSError):
        os.symlink("b", os.path.join(d, "link2"))           # really did not happen
    assert not os.path.lexists(os.path.join(d, "link2"))


@pytest.mark.parametrize("case", ["new_dir", "rewrites", "new_dir_split"])
def test_a_batch_whose_answer_comes_too_late_makes_no_conflict(service, container, need_fuse, case):
    """The answer to a batch's apply comes after op_timeout, though the
    batch ran: the mount sends it again. A directory that batch made, and a
    file that already holds what is sent, are no conflict: nothing is kept
    or reported as failed, and the sandbox has every file. new_dir_split:
    files are saved in the new directory while the late batch is in
    flight; the batch sent again must take the late one's files along
    (the directory holds them), not only the newer ones."""
    import tempfile
    cache = tempfile.mkdtemp(prefix="cache-", dir=service.tmp)
    m = mbtest.Mount(service, container, options=["op_timeout=3", "cache_dir=" + cache])
    try:
        d = m.path(unique("late"))
        rd = "/workspace/" + os.path.basename(d)
        if case == "rewrites":
            os.mkdir(d)
            for i in range(5):
                write_file(os.path.join(d, "f%d" % i), b"v1 %d\n" % i)
            sync(m)
        else:
            assert not os.path.lexists(d)   # the root's listing: an exec
        # the next exec is the batch's apply: it runs, and answers late
        service.fault(route="POST /containers/exec", count=1, delayMs=5000)
        if case != "rewrites":
            os.mkdir(d)
        for i in range(5):
            if case == "new_dir_split" and i == 2:
                # f0 and f1 are in the late batch
                until(lambda: control(m)["writeback"]["inFlightFiles"] >= 1, "the late batch to leave")
            write_file(os.path.join(d, "f%d" % i), b"v2 %d, longer\n" % i)
        for _ in range(2):      # the first may say the sandbox did not answer
            try:
                sync(m)
                break
            except OSError:
                pass
        sync(m)
        assert sh(service, container, "cat %s/f*" % rd) == "".join("v2 %d, longer\n" % i for i in range(5))
        log = m.log()
        assert "conflict" not in log and "could not be made" not in log, log
        assert not kept_files(log), log
        assert not any(fs for _, _, fs in os.walk(os.path.join(cache, "kept"))), log
    finally:
        finish(m)
