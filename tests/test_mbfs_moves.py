"""Renames (and chmods) through the write-back queue: a rename or chmod of
a file already on the sandbox that no one holds open travels in the next
batch, in order with the removals, mkdirs and files queued around it, and
is journaled so that a kill -9 loses none of it. Until it lands the old name shows gone and the
new one shows the file, even to a listing taken from the sandbox again;
an open of the new name waits for it (its bytes are under the old name
there until then).

Tests that need a move to stay queued hold the queue with a first batch
the service answers slowly (hold_writeback): no timing is asserted."""
import errno
import os
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import (control, finish, guest_tree_digest, hold_writeback, invalidate,
                               read_file, requests_of, sh, sync, tree_digest, unique, until,
                               write_file)

EXEC = "POST /containers/exec"
MOVE = "POST /containers/files/move"

pytestmark = pytest.mark.usefixtures("no_faults_left")


def guest_ls(service, container, path):
    return sorted(sh(service, container, "ls -A %s 2>/dev/null; true" % path).split())


def sandbox_files(service, container, name, count):
    """count files f0 ... made by the sandbox in /workspace/name: the mount
    knows them only as the sandbox shows them."""
    sh(service, container, "mkdir -p /workspace/%s && cd /workspace/%s && "
       "for i in $(seq 0 %d); do echo v$i > f$i; done" % (name, name, count - 1))


def held_mount(service, container, tmp_path, name, count):
    """A mount with a cache directory of its own (a kill -9 and a remount
    replay its journal) on count files the sandbox made in name, which it
    has listed, with its queue held: (cache directory, mount, directory)."""
    cache = str(tmp_path / "cache")
    sandbox_files(service, container, name, count)
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    d = m.path(name)
    os.listdir(d)
    hold_writeback(service, m, d)
    return cache, m, d


def test_a_rename_storm_goes_in_a_few_batches(service, container, wb):
    name = unique("storm")
    n = 200
    sandbox_files(service, container, name, n)
    d = wb.path(name)
    assert len(os.listdir(d)) == n
    service.reset_stats()
    for i in range(n):
        os.rename(os.path.join(d, "f%d" % i), os.path.join(d, "g%d" % i))
    # shown at once, and as the files they were
    assert sorted(os.listdir(d)) == sorted("g%d" % i for i in range(n))
    assert os.stat(os.path.join(d, "g17")).st_size == len("v17\n")
    sync(wb)
    # one command a file before; now a batch (a PUT and a command) leaves
    # every 30 ms while the renames run, at most a few on a slow machine
    assert requests_of(service, MOVE) == 0, service.stats()
    assert requests_of(service, EXEC) <= n // 8, service.stats()
    assert guest_ls(service, container, "/workspace/" + name) == sorted("g%d" % i for i in range(n))
    assert sh(service, container, "cat /workspace/%s/g17 /workspace/%s/g199" % (name, name)) == \
        "v17\nv199\n"
    assert control(wb)["writeback"]["pendingRemoves"] == 0
    assert read_file(os.path.join(d, "g5")) == b"v5\n"


def test_a_queued_move_shows_until_it_lands(service, container, wb):
    name = unique("shown")
    sandbox_files(service, container, name, 3)
    d = wb.path(name)
    assert sorted(os.listdir(d)) == ["f0", "f1", "f2"]
    hold_writeback(service, wb, d)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "new"))
    os.rename(os.path.join(d, "f1"), os.path.join(d, "f2"))     # over a file
    assert control(wb)["writeback"]["pendingRemoves"] == 2
    # the sandbox still has the old names, and a listing taken from it
    # again does not bring them back
    assert guest_ls(service, container, "/workspace/" + name) == ["f0", "f1", "f2"]
    invalidate(wb)
    assert sorted(os.listdir(d)) == ["blocker", "f2", "new"]
    for gone in ("f0", "f1"):
        with pytest.raises(FileNotFoundError):
            os.stat(os.path.join(d, gone))
    assert os.stat(os.path.join(d, "new")).st_size == 3
    assert os.stat(os.path.join(d, "f2")).st_size == 3
    # an open waits for the move (its bytes are still under f1 there)
    service.release_held()
    assert read_file(os.path.join(d, "f2")) == b"v1\n"
    assert read_file(os.path.join(d, "new")) == b"v0\n"
    sync(wb)
    assert guest_ls(service, container, "/workspace/" + name) == ["blocker", "f2", "new"]
    assert sh(service, container, "cat /workspace/%s/f2" % name) == "v1\n"


def test_moves_keep_their_order_with_what_comes_around_them(service, container, wb):
    name = unique("order")
    sandbox_files(service, container, name, 3)
    root = wb.path(name)
    os.listdir(root)
    hold_writeback(service, wb, root)
    f = lambda n: os.path.join(root, n)   # noqa: E731
    os.rename(f("f0"), f("t"))              # a swap through a third name
    os.rename(f("f1"), f("f0"))
    os.rename(f("t"), f("f1"))
    os.unlink(f("f1"))                      # a removal after them
    write_file(f("f1"), b"made again\n")    # made again
    os.mkdir(f("sub"))                      # a mkdir, then a move into it
    os.rename(f("f2"), f("sub/f2"))
    os.rename(f("sub/f2"), f("back"))       # and out again
    service.release_held()
    with open(f("back"), "ab") as out:      # an open waits for the moves
        out.write(b"more\n")
    sync(wb)
    want = tree_digest(root)
    assert guest_tree_digest(service, container, "/workspace/" + name) == want
    invalidate(wb)
    assert tree_digest(root) == want
    assert read_file(f("f0")) == b"v1\n"
    assert read_file(f("f1")) == b"made again\n"
    assert read_file(f("back")) == b"v2\nmore\n"
    assert os.listdir(f("sub")) == []
    assert control(wb)["writeback"]["failedFiles"] == 0


def test_a_move_the_sandbox_refuses_is_reported_and_both_show_again(service, container, wb):
    name = unique("refused")
    sandbox_files(service, container, name, 1)
    d = wb.path(name)
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(d, "to"))      # the mount knows the name is free
    hold_writeback(service, wb, d)
    # another client makes a directory there meanwhile
    sh(service, container, "mkdir /workspace/%s/to" % name)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "to"))
    with pytest.raises(OSError) as e:
        sync(wb)
    assert e.value.errno == errno.EIO
    assert "the sandbox refused to rename '/%s/f0' to '/%s/to'" % (name, name) in wb.log(), \
        wb.log()[-2000:]
    assert read_file(os.path.join(d, "f0")) == b"v0\n"
    assert os.path.isdir(os.path.join(d, "to"))
    assert guest_ls(service, container, "/workspace/%s/to" % name) == []


def test_an_open_file_is_renamed_at_once(service, container, wb):
    """A file someone holds open is renamed by its own command, as before:
    its open node's bytes may still be fetched under its name."""
    name = unique("open")
    sandbox_files(service, container, name, 1)
    d = wb.path(name)
    with open(os.path.join(d, "f0"), "rb") as held:
        service.reset_stats()
        os.rename(os.path.join(d, "f0"), os.path.join(d, "g"))
        assert requests_of(service, EXEC) == 1, service.stats()
        assert guest_ls(service, container, "/workspace/" + name) == ["g"]
        assert held.read() == b"v0\n"


def test_queued_moves_survive_kill9(service, container, need_fuse, tmp_path):
    name = unique("crashmv")
    cache, m, d = held_mount(service, container, tmp_path, name, 3)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "g0"))
    os.rename(os.path.join(d, "f1"), os.path.join(d, "f2"))
    os.unlink(os.path.join(d, "f2"))        # after the move onto it
    assert control(m)["writeback"]["pendingRemoves"] == 3
    m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    g = "/workspace/" + name
    assert guest_ls(service, container, g) == ["f0", "f1", "f2"]   # not sent before the kill
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        assert guest_ls(service, container, g) == ["blocker", "g0"]
        assert sh(service, container, "cat %s/g0" % g) == "v0\n"
        assert "mbfs stopped: sent now" in m2.log(), m2.log()
        assert sorted(os.listdir(m2.path(name))) == ["blocker", "g0"]
    finally:
        finish(m2)


def test_a_move_through_a_directory_made_and_removed_here_lands(service, container, wb):
    """mkdir s, a file moved into it and out again, rmdir s, all queued:
    s's mkdir is not dropped as never sent, since the moves need it."""
    name = unique("through")
    sandbox_files(service, container, name, 2)
    d = wb.path(name)
    os.listdir(d)
    hold_writeback(service, wb, d)
    p = lambda *a: os.path.join(d, *a)    # noqa: E731
    os.mkdir(p("s"))
    os.rename(p("f0"), p("s", "f0"))
    os.rename(p("s", "f0"), p("g"))
    os.rmdir(p("s"))
    os.mkdir(p("s2"))
    os.rename(p("f1"), p("s2", "f1"))
    os.unlink(p("s2", "f1"))
    os.rmdir(p("s2"))
    assert sorted(os.listdir(d)) == ["blocker", "g"]
    service.release_held()
    sync(wb)
    assert guest_ls(service, container, "/workspace/" + name) == ["blocker", "g"]
    invalidate(wb)
    assert sorted(os.listdir(d)) == ["blocker", "g"]
    assert read_file(p("g")) == b"v0\n"


def test_a_file_moved_over_a_directory_removed_while_its_mkdir_travels(service, container, wb):
    """The mkdir of x is in the batch on its way; rmdir x, then a file moved
    to x: when the mkdir lands it leaves the moved file's entry alone, and x
    shows as the file throughout."""
    name = unique("overdir")
    sandbox_files(service, container, name, 1)
    d = wb.path(name)
    x = os.path.join(d, "x")
    os.listdir(d)
    sync(wb)
    service.fault(route="PUT /containers/files", count=1, match="wb-", heldMs=45000)
    os.mkdir(x)
    write_file(os.path.join(d, "blocker"), b"b\n")
    until(lambda: service.held() >= 1, "the mkdir's batch held")
    os.rmdir(x)
    os.rename(os.path.join(d, "f0"), x)
    assert os.path.isfile(x)
    service.release_held()
    sync(wb)
    assert os.path.isfile(x) and read_file(x) == b"v0\n"
    assert sorted(os.listdir(d)) == ["blocker", "x"]
    assert sh(service, container, "cat /workspace/%s/x" % name) == "v0\n"


def test_moves_whose_answer_was_lost_are_not_done_again(service, container, need_fuse):
    """The batch ran on the sandbox, its answer lost until the batch gave
    up, so its moves went again in a new batch: its ledger there says they
    are done (a swap back would lose v0)."""
    name = unique("lost")
    sandbox_files(service, container, name, 2)
    m = mbtest.Mount(service, container, options=["op_timeout=1"])
    try:
        d = m.path(name)
        os.listdir(d)
        service.fault(route="POST /containers/exec", count=5, status=503, error="unavailable",
                      when="after")
        os.rename(os.path.join(d, "f0"), os.path.join(d, "g"))
        os.rename(os.path.join(d, "f1"), os.path.join(d, "f0"))
        until(lambda: control(m)["writeback"]["pendingRemoves"] == 0, "the moves landed")
        service.clear_faults()
        sync(m)
        assert sh(service, container, "cd /workspace/%s && grep . *" % name) == "f0:v1\ng:v0\n"
        assert read_file(os.path.join(d, "g")) == b"v0\n"
        assert read_file(os.path.join(d, "f0")) == b"v1\n"
    finally:
        finish(m)


def test_a_replay_after_kill9_does_no_move_twice(service, container, need_fuse, tmp_path):
    """The moves' batch ran on the sandbox, its answer held, when the mount
    was killed: the next mount replays them from the journal, and the
    killed mount's ledger says they are done."""
    cache = str(tmp_path / "cache")
    name = unique("replay")
    sandbox_files(service, container, name, 2)
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    d = m.path(name)
    os.listdir(d)
    sync(m)
    service.fault(route="POST /containers/exec", count=1, heldMs=60000)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "g"))
    os.rename(os.path.join(d, "f1"), os.path.join(d, "f0"))
    # (a file read, not a command: the fault holds the next command)
    until(lambda: service.get_file(container, "/workspace/%s/g" % name) == (200, b"v0\n"),
          "the moves done on the sandbox")
    until(lambda: service.held() >= 1, "their answer held")
    m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    service.release_held()
    service.clear_faults()
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        assert sh(service, container, "cd /workspace/%s && grep . *" % name) == "f0:v1\ng:v0\n"
        assert "cannot be done on the sandbox now" not in m2.log(), m2.log()
    finally:
        finish(m2)


def test_a_chmod_storm_goes_in_a_few_batches_and_shows_at_once(service, container, wb):
    name = unique("chmod")
    n = 200
    sandbox_files(service, container, name + "/s", n)
    d = wb.path(name, "s")
    os.listdir(d)
    hold_writeback(service, wb, wb.path(name))   # its blocker is beside s
    service.reset_stats()
    subprocess.run(["chmod", "-R", "u=rwx,go=", d], check=True)
    assert requests_of(service, EXEC) == 0, service.stats()
    # shown at once, also over a listing taken from the sandbox again
    invalidate(wb)
    assert {os.stat(os.path.join(d, "f%d" % i)).st_mode & 0o777 for i in range(n)} == {0o700}
    service.release_held()
    sync(wb)
    assert requests_of(service, EXEC) <= 4, service.stats()
    modes = sh(service, container, "stat -c %%a /workspace/%s/s /workspace/%s/s/f* | sort -u"
               % (name, name))
    assert modes == "700\n", modes
    assert control(wb)["writeback"]["failedFiles"] == 0


def test_a_queued_chmod_survives_kill9(service, container, need_fuse, tmp_path):
    name = unique("crashchmod")
    cache, m, d = held_mount(service, container, tmp_path, name, 2)
    os.chmod(os.path.join(d, "f0"), 0o751)
    m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        assert sh(service, container, "stat -c %%a /workspace/%s/f0" % name) == "751\n"
        assert os.stat(m2.path(name, "f0")).st_mode & 0o777 == 0o751
    finally:
        finish(m2)


def test_a_time_set_after_a_queued_chmod_keeps_the_mode(service, container, wb):
    """utime after a queued chmod: the times batch reads the file's
    attributes back from the sandbox, which must not bring the old mode
    back (the random stress test caught it)."""
    name = unique("chtime")
    sandbox_files(service, container, name, 1)
    p = os.path.join(wb.path(name), "f0")
    os.stat(p)
    os.chmod(p, 0o600)
    os.utime(p, (1500000000, 1500000000))
    sync(wb)
    st = os.stat(p)
    assert (st.st_mode & 0o777, int(st.st_mtime)) == (0o600, 1500000000)
    assert sh(service, container, "stat -c '%%a %%Y' /workspace/%s/f0" % name) == "600 1500000000\n"


def test_a_queued_chmod_changes_nothing_the_sandbox_put_in_the_files_place(service, container, wb):
    """While the chmod waits, a sandbox process puts a directory where the
    file was: the chmod is refused and reported, the directory keeps its
    mode."""
    name = unique("chplace")
    sandbox_files(service, container, name + "/s", 1)
    p = wb.path(name, "s", "f0")
    os.stat(p)
    hold_writeback(service, wb, wb.path(name))
    os.chmod(p, 0o700)
    sh(service, container, "cd /workspace/%s/s && rm f0 && mkdir -m 755 f0" % name)
    with pytest.raises(OSError) as e:
        sync(wb)
    assert e.value.errno == errno.EIO
    assert "the sandbox refused to change the mode of '/%s/s/f0'" % name in wb.log(), wb.log()[-2000:]
    assert sh(service, container, "stat -c %%a /workspace/%s/s/f0" % name) == "755\n"


def test_a_queued_chmod_shows_on_its_file_not_on_the_next_one_at_the_name(service, container, wb):
    name = unique("chnext")
    sandbox_files(service, container, name + "/s", 2)
    d = wb.path(name, "s")
    os.listdir(d)
    hold_writeback(service, wb, wb.path(name))
    os.chmod(os.path.join(d, "f0"), 0o700)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "g"))
    os.rename(os.path.join(d, "f1"), os.path.join(d, "f0"))
    invalidate(wb)
    assert os.stat(os.path.join(d, "f0")).st_mode & 0o777 == 0o644
    assert os.stat(os.path.join(d, "g")).st_mode & 0o777 == 0o700
    service.release_held()
    sync(wb)
    assert sh(service, container, "stat -c '%%n %%a' /workspace/%s/s/f0 /workspace/%s/s/g"
              % (name, name)) == "/workspace/%s/s/f0 644\n/workspace/%s/s/g 700\n" % (name, name)


def test_a_replay_killed_in_turn_does_no_move_twice(service, container, need_fuse, tmp_path):
    """A queues f0->g, f1->f0 and is killed before they go; B replays them
    (they run, the answer is held) and is killed too; C replays A's outbox
    again. B wrote the moves it did in the ledger A's journal names (made
    there, since A never sent a batch of them), so C does none again."""
    name = unique("chain")
    cache, m, d = held_mount(service, container, tmp_path, name, 2)
    os.rename(os.path.join(d, "f0"), os.path.join(d, "g"))
    os.rename(os.path.join(d, "f1"), os.path.join(d, "f0"))
    m.kill9()
    service.release_held()
    service.clear_faults()
    # B: its replay's command runs, its answer held; a mount that never
    # comes up is started by hand
    service.fault(route="POST /containers/exec", count=1, heldMs=60000)
    mnt = str(tmp_path / "b")
    os.mkdir(mnt)
    spec = "%s@%s:/workspace" % (container["id"], container["createdAt"])
    b = subprocess.Popen([mbtest.MBFS, "-f", spec, mnt, "-o", "cache_dir=" + cache],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=service.env())
    try:
        until(lambda: service.get_file(container, "/workspace/%s/g" % name) == (200, b"v0\n"),
              "B's replay done on the sandbox")
        until(lambda: service.held() >= 1, "its answer held")
    finally:
        b.kill()
        b.wait()
        subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
    service.release_held()
    service.clear_faults()
    m3 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        assert sh(service, container, "cd /workspace/%s && grep . f0 g" % name) == "f0:v1\ng:v0\n"
    finally:
        finish(m3)
