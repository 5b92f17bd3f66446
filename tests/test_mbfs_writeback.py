"""Write-back of small files: close() queues them, batches carry them (one
archive in 1 MiB PUTs and one command per batch), and fsync, the control
file's "sync" (mbexec, `mbfs --status --wait`) and unmount wait for them and
report failures; -o sync_close restores uploads at close; a crash with files
still queued loses nothing.

Tests that need a file to stay queued while something else happens hold the
queue with a first batch that the service answers slowly (one batch is in
flight at a time): no timing is asserted."""
import errno
import os
import re
import resource
import signal
import subprocess
import threading
import time

import pytest

import mbtest
from test_mbfs_helpers import (control, finish, guest_tree_digest, hold_writeback,
                               read_file, requests_of, sh, status, sync, tree_digest, unique,
                               until, write_file)

UMASK = os.umask(0o022)
os.umask(UMASK)

PUT = "PUT /containers/files"
EXEC = "POST /containers/exec"
MOVE = "POST /containers/files/move"
REMOVE = "DELETE /containers/files/remove"


pytestmark = pytest.mark.usefixtures("no_faults_left")


def api_requests(service):
    return sum(n for route, n in service.stats().get("requests", {}).items()
               if " /containers" in route)



@pytest.fixture
def slow_wb(service, container, need_fuse):
    """Write-back whose held batch may wait for minutes (op_timeout=600):
    under ASan, writing hundreds of files behind it outlasts the default
    60 s that would end the held PUT."""
    m = mbtest.Mount(service, container, writeback=True, options=["op_timeout=600"])
    yield m
    finish(m)


def test_many_small_files_go_in_few_requests(service, container, slow_wb):
    wb = slow_wb
    d = wb.path(unique("many"))
    os.mkdir(d)
    hold_writeback(service, wb, d, held_ms=500000)   # they all wait for one batch
    service.reset_stats()
    want = {os.path.join(d, "blocker"): b"b\n"}
    for i in range(200):
        p = os.path.join(d, "f%03d.txt" % i)
        data = (b"%d\n" % i) * (i * 7)          # 0 bytes to a few KiB
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755 if i % 3 == 0 else 0o640)
        os.write(fd, data)
        os.close(fd)
        want[p] = data
    # what is queued reads as written, before and after it lands
    assert control(wb)["writeback"]["pendingFiles"] == 201
    assert sorted(os.listdir(d)) == sorted(os.path.basename(p) for p in want)
    assert read_file(os.path.join(d, "f150.txt")) == want[os.path.join(d, "f150.txt")]
    assert os.stat(os.path.join(d, "f003.txt")).st_mode & 0o777 == 0o755 & ~UMASK
    assert os.stat(os.path.join(d, "f004.txt")).st_mode & 0o777 == 0o640 & ~UMASK
    r = status(wb, "--wait")
    assert r.returncode == 0, r
    assert "pending: 0 files" in r.stdout, r.stdout
    assert control(wb)["writeback"]["pendingFiles"] == 0
    rel = os.path.relpath(d, wb.mountpoint)
    assert guest_tree_digest(service, container, "/workspace/" + rel) == tree_digest(d)
    # ~90 KiB in one batch: one PUT and one command (with the held batch's
    # command), where one by one it took 200 PUTs and 67 chmods
    assert requests_of(service, PUT) <= 2, service.stats()
    assert requests_of(service, EXEC) <= 3, service.stats()   # + the test's own sh
    assert api_requests(service) <= 6, service.stats()["requests"]
    # nothing of the staging is left in the tree
    assert ".mbfs-up" not in sh(service, container, "ls -A /workspace /workspace/" + rel)


def test_directory_times_wait_for_nothing_and_hold_on_the_sandbox(service, container, wb):
    """tar x sets a directory's time after writing its files: the time
    travels behind them (their renames on the sandbox move it), and utime
    returns without waiting for them."""
    d = wb.path(unique("dtimes"))
    os.mkdir(d)
    sub = os.path.join(d, "sub")
    os.mkdir(sub)
    hold_writeback(service, wb, d)          # d/blocker held in flight
    for i in range(5):
        write_file(os.path.join(sub, "f%d" % i), b"%d\n" % i)
    os.utime(sub, (1400000000, 1400000000))
    os.utime(d, (1300000000, 1300000000))   # its own file is in flight
    os.utime(sub, (1400000000, 1410000000))  # set again: the last one counts
    # the files are still on their way: utime did not wait for them
    assert control(wb)["writeback"]["pendingFiles"] >= 5
    assert os.stat(sub).st_mtime == 1410000000
    assert os.stat(d).st_mtime == 1300000000
    # the held batch lands (its rename moves d's mtime on the sandbox)
    # while the next one, which sets the times again, is slow: the mount
    # shows the times set all along
    service.fault(route=PUT, count=1, match="wb-", delayMs=3000)
    service.release_held()                  # the held one goes; the next is slow

    def next_batch_out():
        w = control(wb)["writeback"]
        return w["sentFiles"] >= 1 and w["inFlightFiles"] >= 5
    until(next_batch_out, "the held batch to land and the next to leave")
    assert os.stat(d).st_mtime == 1300000000
    assert os.stat(sub).st_mtime == 1410000000
    r = status(wb, "--wait")
    assert r.returncode == 0, r
    rel = os.path.relpath(d, wb.mountpoint)
    out = sh(service, container, "cd '/workspace/%s' && stat -c '%%n %%Y' . sub && ls sub" % rel)
    assert out.split() == [".", "1300000000", "sub", "1410000000", "f0", "f1", "f2", "f3", "f4"]
    assert os.stat(sub).st_mtime == 1410000000
    assert os.stat(d).st_mtime == 1300000000


def test_temp_file_renamed_in_queue_travels_once_under_its_name(service, container, wb):
    d = wb.path(unique("atomic"))
    os.mkdir(d)
    write_file(os.path.join(d, "conf"), b"old\n")
    assert status(wb, "--wait").returncode == 0
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    hold_writeback(service, wb, d)
    service.reset_stats()
    tmp = os.path.join(d, ".conf.tmp")
    write_file(tmp, b"new\n")
    os.chmod(tmp, 0o640)
    os.rename(tmp, os.path.join(d, "conf"))      # an editor's atomic save
    assert read_file(os.path.join(d, "conf")) == b"new\n"
    assert not os.path.exists(tmp)
    assert status(wb, "--wait").returncode == 0
    # the rename happened here: no move, no remove, and the temp name never
    # reached the sandbox; the file replaced the old one in place
    stats = service.stats()
    assert requests_of(service, MOVE) == 0 and requests_of(service, REMOVE) == 0, stats
    assert sh(service, container, "cat %s/conf; stat -c %%a %s/conf; ls -A %s" % (rel, rel, rel)) == \
        "new\n640\nblocker\nconf\n"


def test_git_style_link_of_a_queued_temp_file(service, container, wb):
    """git writes an object as a temporary file, links it into place and
    removes the temporary: only the object travels, in a batch."""
    d = wb.path(unique("objects"))
    os.mkdir(d)
    hold_writeback(service, wb, d)
    service.reset_stats()
    tmp, obj = os.path.join(d, "tmp_obj_1"), os.path.join(d, "ab12")
    write_file(tmp, b"blob\n")
    os.chmod(tmp, 0o444)
    os.link(tmp, obj)
    os.unlink(tmp)
    with pytest.raises(FileExistsError):
        os.link(obj, obj)
    assert read_file(obj) == b"blob\n"
    assert status(wb, "--wait").returncode == 0
    stats = service.stats()
    assert requests_of(service, REMOVE) == 0 and requests_of(service, EXEC) <= 2, stats
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    assert sh(service, container, "ls -A %s; cat %s/ab12; stat -c %%a %s/ab12" % (rel, rel, rel)) == \
        "ab12\nblocker\nblob\n444\n"


@pytest.mark.parametrize("which", ["source", "link"])
def test_queued_file_and_its_link_change_apart(service, container, wb, which):
    """A link of a queued file shares its local copy until one of the two
    is written: the other keeps its content, here and on the sandbox."""
    d = wb.path(unique("linked"))
    os.mkdir(d)
    hold_writeback(service, wb, d)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    write_file(a, b"first version\n")
    os.link(a, b)
    changed, other = (a, b) if which == "source" else (b, a)
    with open(changed, "r+b") as f:
        f.write(b"FIRST")
    with open(changed, "ab") as f:
        f.write(b"and more\n")
    assert read_file(other) == b"first version\n"
    assert read_file(changed) == b"FIRST version\nand more\n"
    assert status(wb, "--wait").returncode == 0
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    assert sh(service, container, "cat %s; echo --; cat %s" % (
        rel + "/" + os.path.basename(other), rel + "/" + os.path.basename(changed))) == \
        "first version\n--\nFIRST version\nand more\n"
    # emptied at open (O_TRUNC) after the link: the other still has its bytes
    os.link(other, os.path.join(d, "c"))
    with open(other, "wb") as f:
        f.write(b"")
    assert read_file(os.path.join(d, "c")) == b"first version\n"


def test_file_created_and_removed_in_queue_never_travels(service, container, wb):
    d = wb.path(unique("gone"))
    os.mkdir(d)
    hold_writeback(service, wb, d)
    service.reset_stats()
    p = os.path.join(d, "scratch")
    write_file(p, b"x" * 1000)
    os.unlink(p)
    assert not os.path.exists(p)
    assert status(wb, "--wait").returncode == 0
    # only the held batch's command ran; nothing was sent for scratch
    assert requests_of(service, EXEC) <= 1, service.stats()
    assert requests_of(service, REMOVE) == 0, service.stats()
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    assert sh(service, container, "ls -A " + rel) == "blocker\n"


def test_fsync_reports_a_failed_batch_and_keeps_the_data(service, container, wb):
    name = unique("precious")
    # a definite refusal of the archive's PUT (a full /tmp on the sandbox)
    service.fault(route=PUT, count=20, match="wb-", status=403, error="file_access_denied")
    data = b"data that must not be lost\n"
    write_file(wb.path(name), data)      # close() queues it and succeeds
    fd = os.open(wb.path(name), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    service.clear_faults()
    rpath = "/workspace/" + name
    lines = [l for l in wb.log().splitlines() if "upload of '%s' failed" % rpath in l]
    assert len(lines) == 1, wb.log()
    kept = re.findall(r"data kept in (\S+)", lines[0])
    assert kept and read_file(kept[0]) == data
    doc = control(wb)
    assert [k["path"] for k in doc["kept"]] == [rpath]
    assert doc["writeback"]["failedFiles"] == 1
    # the next sync reports it too (once), and --status names where it is
    r = status(wb, "--wait")
    assert r.returncode == 1, r
    assert kept[0] in r.stdout
    assert status(wb, "--wait").returncode == 0
    # never on the sandbox, never partial
    assert name not in sh(service, container, "ls -A /workspace").split()
    # and gone from the mount, even for an open of the name the kernel may
    # still hold from before the failure: no empty file appears
    for flags in (os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
        with pytest.raises(FileNotFoundError):
            os.close(os.open(wb.path(name), flags))
    assert not os.path.exists(wb.path(name))
    assert name not in os.listdir(wb.mountpoint)


def test_transient_faults_are_retried(service, container, wb):
    name = unique("flaky")
    service.fault(route=PUT, count=2, match="wb-", status=503, error="files_unavailable")
    service.fault(route=EXEC, count=1, status=429, error="execution_limit")
    write_file(wb.path(name), b"ok\n")
    r = status(wb, "--wait")
    assert r.returncode == 0, (r, wb.log())
    assert sh(service, container, "cat /workspace/" + name) == "ok\n"


def test_sync_close_uploads_at_close_and_reports_there(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["sync_close"])
    try:
        name = unique("sync-close")
        write_file(m.path(name), b"one\n")
        # on the sandbox as close returns: nothing queued, no sync needed
        assert sh(service, container, "cat /workspace/" + name) == "one\n"
        service.fault(route=PUT, count=3, status=403, error="file_access_denied")
        f = open(m.path(name), "wb")
        f.write(b"two\n")
        with pytest.raises(OSError):
            f.close()
        assert sh(service, container, "cat /workspace/" + name) == "one\n"
        assert control(m)["writeback"]["sentFiles"] == 0
    finally:
        finish(m)


def test_mbexec_sees_files_closed_before_it(service, container, wb):
    d = wb.path(unique("seen"))
    os.mkdir(d)
    hold_writeback(service, wb, d)
    write_file(os.path.join(d, "f"), b"x\n")
    p = mbtest.run_mbexec(service, ["cat", "blocker", "f"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"b\nx\n"


def test_unmount_sends_what_is_queued(service, container, need_fuse):
    m = mbtest.Mount(service, container, writeback=True)
    name = unique("at-unmount")
    try:
        d = m.path(name)
        os.mkdir(d)
        hold_writeback(service, m, d)
        for i in range(5):
            write_file(os.path.join(d, "f%d" % i), b"%d\n" % i)
    finally:
        finish(m)
    assert sh(service, container, "cat /workspace/%s/f0 /workspace/%s/f4" % (name, name)) == "0\n4\n"


def test_kill9_with_queued_files_then_remount_uploads_them(service, container, need_fuse, tmp_path):
    cache = str(tmp_path / "cache")
    name = unique("crash-queued")
    # every batch fails for now, as a transient fault: the files stay queued
    service.fault(route=PUT, count=100000, match="wb-", status=503, error="files_unavailable")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    try:
        d = m.path(name)
        os.mkdir(d)
        for i in range(5):
            write_file(os.path.join(d, "f%d" % i), b"queued %d\n" % i)
        os.chmod(os.path.join(d, "f1"), 0o755)
        assert control(m)["writeback"]["pendingFiles"] == 5
    finally:
        m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    service.clear_faults()
    # the directory's mkdir was queued with them: it never left either
    assert sh(service, container, "test -e /workspace/%s || echo absent" % name) == "absent\n"
    # the next mount finds them in the journal and uploads them, making
    # the directory they were written in
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    finish(m2)
    out = sh(service, container, "cd /workspace/%s && cat f0 f1 f2 f3 f4 && stat -c %%a f1 f2" % name)
    assert out == "queued 0\nqueued 1\nqueued 2\nqueued 3\nqueued 4\n755\n644\n", out


def test_kill9_while_a_batch_is_in_flight_is_no_conflict(service, container, need_fuse, tmp_path):
    # the batch's command runs but its answer is held; mbfs dies meanwhile.
    # The next mount finds the journal's files already on the sandbox, byte
    # for byte: uploaded, not "made on the sandbox since".
    cache = str(tmp_path / "cache")
    name = unique("crash-inflight")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    try:
        d = m.path(name)
        os.mkdir(d)
        # every batch's command: under load the 8 files may leave in more than one
        service.fault(route=EXEC, count=8, delayMs=20000, when="after")
        for i in range(8):
            write_file(os.path.join(d, "f%d" % i), b"in flight %d\n" % i)
        # (files routes only: an exec of ours would take the fault)
        until(lambda: all(service.get_file(container, "/workspace/%s/f%d" % (name, i))[0] == 200
                             for i in range(8)), "the batches landing")
        # the last batch's answer is not back yet (all 8, or the last of
        # the batches they left in)
        assert control(m)["writeback"]["inFlightFiles"] >= 1
    finally:
        m.kill9()
        service.clear_faults()
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    try:
        assert not control(m2).get("kept"), control(m2)
    finally:
        log = finish(m2)
    assert "made on the sandbox since" not in log, log
    assert not [f for _, _, fs in os.walk(os.path.join(cache, "kept")) for f in fs]
    assert sh(service, container, "cat /workspace/%s/f7" % name) == "in flight 7\n"


def test_status_of_something_else_fails(tmp_path):
    r = subprocess.run([mbtest.MBFS, "--status", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "not an mbfs mount" in r.stderr


@pytest.mark.parametrize("wait", ["landed", "in flight", "queued"])
def test_a_removed_file_does_not_come_back(service, container, wb, wait):
    """echo v1 > f; echo v2 > f.tmp; mv f.tmp f; rm f: nothing of f stays,
    whether v1 is on the sandbox when the rest happens, on its way, or
    not yet."""
    d = wb.path(unique("resurrect"))
    os.mkdir(d)
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    f = os.path.join(d, "f")
    if wait == "in flight":
        service.fault(route=PUT, count=1, match="wb-", delayMs=3000)
        write_file(f, b"v1\n")
        until(lambda: control(wb)["writeback"]["inFlightFiles"] == 1, "v1's batch leaving")
    else:
        write_file(f, b"v1\n")
    if wait == "landed":
        assert status(wb, "--wait").returncode == 0
    write_file(f + ".tmp", b"v2\n")
    os.rename(f + ".tmp", f)
    os.unlink(f)
    assert status(wb, "--wait").returncode == 0
    assert not os.path.exists(f)
    assert sh(service, container, "ls -A %s" % rel) == ""
    p = mbtest.run_mbexec(service, ["ls", "-A"], cwd=d)
    assert p.returncode == 0 and p.stdout == b"", p
    assert os.listdir(d) == []


def test_file_times_survive_kill9(service, container, need_fuse, tmp_path):
    """Queued files, some with times set (tar, cp -p), then kill -9: the
    next mount gives each its time on the sandbox, to the nanosecond, and
    its mode."""
    cache = str(tmp_path / "cache")
    name = unique("crash-times")
    service.fault(route=PUT, count=100000, match="wb-", status=503, error="files_unavailable")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    want = {}
    try:
        d = m.path(name)
        os.mkdir(d)
        for i in range(6):
            f = os.path.join(d, "f%d" % i)
            write_file(f, b"timed %d\n" % i)
            if i % 2:
                os.utime(f, ns=(1500000000 * 10**9, (1500000000 + i) * 10**9 + 123456789))
        os.chmod(os.path.join(d, "f3"), 0o751)
        for i in range(6):
            st = os.stat(os.path.join(d, "f%d" % i))
            want["f%d" % i] = (st.st_mtime_ns, "%o" % (st.st_mode & 0o7777))
    finally:
        m.kill9()
        service.clear_faults()
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache], writeback=True)
    finish(m2)
    out = sh(service, container, "cd /workspace/%s && find . -type f -printf '%%f %%T@ %%m\\n'" % name)
    got = {}
    for line in out.splitlines():
        n, t, mode = line.split()
        sec, frac = t.split(".")
        got[n] = (int(sec) * 10**9 + int(frac[:9].ljust(9, "0")), mode)
    assert got == want


@pytest.mark.parametrize("case", ["changed", "made"])
def test_a_sandbox_change_to_a_queued_file_is_kept_and_reported(service, container, wb, case):
    """A file changed (or made) on the sandbox after the mount's close and
    before its batch lands: the sandbox's version stays, the mount's goes
    to kept/, and the next sync and --status say so."""
    d = wb.path(unique("conflict"))
    os.mkdir(d)
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    f = os.path.join(d, "f")
    if case == "changed":
        write_file(f, b"base\n")
    assert status(wb, "--wait").returncode == 0
    hold_writeback(service, wb, d)
    write_file(f, b"the mount's version\n")
    sh(service, container, "echo 'the sandbox version, meanwhile' > %s/f" % rel)
    r = status(wb, "--wait")
    assert r.returncode == 1, r
    assert sh(service, container, "cat %s/f" % rel) == "the sandbox version, meanwhile\n"
    doc = control(wb)
    assert [k["path"] for k in doc["kept"]] == [rel + "/f"], doc
    lines = [l for l in wb.log().splitlines() if "conflict" in l and rel + "/f" in l]
    assert lines, wb.log()[-2000:]
    kept = re.findall(r"data kept in (\S+)", lines[0])
    assert kept and read_file(kept[0]) == b"the mount's version\n"
    assert kept[0] in r.stdout


def test_queued_files_past_a_low_fd_limit(service, container, need_fuse):
    """Each queued file holds its working copy open. Started under a soft
    limit of 256 open files, mbfs raises it to the hard one: 600 files
    written while the queue is held all land, none fails with EMFILE."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip("the hard limit of open files is only %d" % hard)
    m = mbtest.Mount(service, container, writeback=True, nofile=(256, hard))
    try:
        with open("/proc/%d/limits" % m.proc.pid) as f:
            line = [l for l in f if l.startswith("Max open files")][0]
        assert int(line.split()[3]) == int(line.split()[4]) or line.split()[3] == "unlimited", line
        d = m.path(unique("manyfds"))
        os.mkdir(d)
        hold_writeback(service, m, d)       # they wait, each holding its copy
        for i in range(600):
            write_file(os.path.join(d, "f%03d" % i), b"%d\n" % i)
        sync(m)
        rel = "/workspace/" + os.path.relpath(d, m.mountpoint)
        assert sh(service, container, "ls %s | wc -l" % rel).split() == ["601"]
    finally:
        finish(m)


def test_cp_r_under_a_hard_fd_limit(service, container, need_fuse, tmp_path):
    """A hard limit the daemon cannot raise (ulimit -n 512): a cp -r of
    3,000 small files keeps its queue within it (a create waits for a
    batch to land) instead of failing creates with EMFILE."""
    src = tmp_path / "src"
    for i in range(3000):
        d = src / ("p%02d" % (i // 100))
        d.mkdir(parents=True, exist_ok=True)
        (d / ("f%d" % i)).write_bytes(b"%d\n" % i)
    m = mbtest.Mount(service, container, writeback=True, nofile=(512, 512))
    try:
        dst = m.path(unique("cpfds"))
        r = subprocess.run(["cp", "-r", str(src), dst], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        sync(m)
        rel = "/workspace/" + os.path.relpath(dst, m.mountpoint)
        assert sh(service, container, "find %s -type f | wc -l" % rel).split() == ["3000"]
        assert sh(service, container, "cat %s/p29/f2999" % rel) == "2999\n"
    finally:
        finish(m)


def sync_beside_a_writer(mount, write, landed):
    """sync while a thread calls write(i) every 10 ms (for at most 60 s):
    it must return while the writer still runs, with landed() at least
    the writes made before it began."""
    import threading
    stop = threading.Event()
    done = []

    def writer():
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            write(len(done))
            done.append(1)
            time.sleep(0.01)
    th = threading.Thread(target=writer)
    th.start()
    try:
        until(lambda: len(done) >= 20, "the writer under way")
        mark = len(done)
        sync(mount)
        assert th.is_alive(), "sync returned only once the writer had stopped"
        assert landed() >= mark
    finally:
        stop.set()
        th.join()
    sync(mount)


def test_sync_returns_while_another_program_keeps_writing(service, container, mount):
    """sync (mbexec writes it before every command) waits for what was
    queued before it, not for what a program that keeps writing queues
    after: it returned only once the writer stopped."""
    d = mount.path(unique("busy"))
    os.mkdir(d)
    rel = "/workspace/" + os.path.relpath(d, mount.mountpoint)
    sync_beside_a_writer(
        mount, lambda i: write_file(os.path.join(d, "f%d" % i), b"x"),
        lambda: int(sh(service, container, "ls %s | wc -l" % rel)))


def test_sync_returns_while_a_program_keeps_rewriting_one_file(service, container, mount):
    """The same with one file, closed again while its batch is in flight:
    what it held before the sync lands, and the sync does not wait for the
    closes after it."""
    f = mount.path(unique("rewritten"))
    rel = "/workspace/" + os.path.relpath(f, mount.mountpoint)

    def append(i):
        with open(f, "a") as w:
            w.write("%d\n" % i)
    sync_beside_a_writer(
        mount, append, lambda: len(sh(service, container, "cat %s" % rel).split()))


def test_a_sync_is_not_failed_by_a_file_queued_after_it_began(service, container, wb):
    """mbexec's sync waits for what was queued before it; a file another
    program closes meanwhile, which the sandbox then refuses, is said by
    the next sync, not this one (the command would not start)."""
    d = wb.path(unique("later"))
    os.makedirs(os.path.join(d, "x"))
    sync(wb)
    rel = "/workspace/" + os.path.relpath(d, wb.mountpoint)
    # the sandbox puts a file where x was: what is queued into x cannot land
    sh(service, container, "rmdir %s/x && echo f > %s/x" % (rel, rel))
    hold_writeback(service, wb, d)
    write_file(os.path.join(d, "a"), b"a\n")
    outcome = {}

    def run_sync():
        try:
            with open(wb.path(".mainbrella"), "w") as f:
                f.write("sync\n")
            outcome["rc"] = 0
        except OSError as e:
            outcome["rc"] = e.errno

    t = threading.Thread(target=run_sync)
    t.start()
    try:
        until(lambda: control(wb)["writeback"]["syncing"] >= 1, "the sync to wait")
        write_file(os.path.join(d, "x", "b"), b"b\n")   # queued after it began
    finally:
        service.release_held()
        t.join(120)
    assert outcome == {"rc": 0}, (outcome, wb.log()[-2000:])
    assert sh(service, container, "cat %s/a" % rel) == "a\n"
    # the refused file: said by the next sync, and kept
    with pytest.raises(OSError):
        sync(wb)
    assert control(wb)["writeback"]["failedFiles"] == 1
