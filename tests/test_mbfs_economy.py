"""mbfs request economy for writers: creates without exec, negative lookups
from known listings, no stat after our own uploads, batched utimens, the
`sync` control message and stable inode numbers. Each test checks what
landed on the sandbox as well as what it cost."""
import errno
import os
import re
import subprocess
import tarfile
import time

import pytest

import mbtest
from test_mbfs_helpers import (CONTROL, close_fails_or_sync_does, hold_writeback, invalidate, read_file, requests, sh, sync,
                               unique, write_file)

STAT = "GET /containers/files/stat"
LIST = "GET /containers/files/list"
GET = "GET /containers/files"
PUT = "PUT /containers/files"
EXEC = "POST /containers/exec"


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def wbmount(service, container, need_fuse):
    """A mount with write-back whatever MB_TEST_SYNC_CLOSE says: for the
    tests that count its batches."""
    m = mbtest.Mount(service, container, writeback=True)
    yield m
    rc = m.unmount()
    assert not mbtest.sanitizer_report(m.log()), m.log()
    assert rc == 0, m.log()[-3000:]


def rel(mount, path):
    return "/workspace/" + os.path.relpath(path, mount.mountpoint)


def guest_listing(service, container, root):
    """sha256 of every file, then name, mode and mtime of every entry."""
    return sh(service, container,
              "cd '%s' && find . -type f | LC_ALL=C sort | xargs sha256sum && "
              "find . -mindepth 1 | LC_ALL=C sort | xargs stat -c '%%n %%a %%Y'" % root)


def test_tar_x_of_300_small_files(service, container, wbmount, tmp_path):
    mount = wbmount
    src = tmp_path / "src"
    (src / "x").mkdir(parents=True)
    for i in range(300):
        p = src / "x" / ("f%03d.txt" % i)
        p.write_bytes(os.urandom(40 + i))
        os.chmod(str(p), (0o600, 0o644, 0o755)[i % 3])
        os.utime(str(p), (1500000000 + i, 1500000000 + 7 * i))
    os.utime(str(src / "x"), (1400000000, 1400000000))
    archive = tmp_path / "t.tar"
    with tarfile.open(str(archive), "w") as t:
        t.add(str(src / "x"), arcname="x")
    name = unique("untar")
    os.mkdir(mount.path(name))
    held = mount.path(unique("held"))
    os.mkdir(held)
    hold_writeback(service, mount, held)   # the files wait for one batch
    service.reset_stats()
    r = subprocess.run(["tar", "-xf", str(archive), "-C", mount.path(name)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r
    sync(mount)
    stats = service.stats()
    assert mbtest.requests_for(stats, STAT) <= 3, stats
    assert mbtest.requests_for(stats, EXEC) <= 300 // 20, stats
    # write-back: the files (and their modes and times) travel in one
    # archive PUT and one command (with the held batch's PUT, which may be
    # counted after the reset: 2), where one by one it took 300 PUTs; the
    # bound is the commands' one, in case tar outlasts the 5 s hold
    assert mbtest.requests_for(stats, PUT) <= 300 // 20, stats
    # the files' modes are in the archive: at most x's own chmod by tar
    assert mbtest.requests_for(stats, "PATCH /containers/files/chmod") <= 1, stats
    # contents, modes and mtimes as in the archive
    want = guest_listing(service, container, "/workspace/" + name)
    local = subprocess.run("cd '%s' && find . -type f | LC_ALL=C sort | xargs sha256sum && "
                           "find . -mindepth 1 | LC_ALL=C sort | xargs stat -c '%%n %%a %%Y'"
                           % (src,), shell=True, capture_output=True).stdout.decode()
    assert want == local
    # and the mount shows the same without asking again
    service.reset_stats()
    st = os.stat(mount.path(name, "x", "f007.txt"))
    assert int(st.st_mtime) == 1500000049 and st.st_mode & 0o777 == 0o644
    assert requests(service, STAT) == 0


def test_touch_shows_at_once_and_lands_on_sync(service, container, mount):
    d = mount.path(unique("touch"))
    os.mkdir(d)
    p = os.path.join(d, "f")
    write_file(p, b"x")
    want = int(subprocess.run(["date", "-d", "2001-02-03 04:05:06", "+%s"],
                              capture_output=True).stdout)
    r = subprocess.run(["touch", "-d", "2001-02-03 04:05:06", p], capture_output=True)
    assert r.returncode == 0, r
    assert int(os.stat(p).st_mtime) == want
    sync(mount)
    assert sh(service, container, "stat -c %Y " + rel(mount, p)).strip() == str(want)


def test_100_touches_cost_few_execs(service, container, mount):
    d = mount.path(unique("touches"))
    os.mkdir(d)
    names = ["f%02d" % i for i in range(100)]
    for n in names:
        write_file(os.path.join(d, n), n.encode())
    # what `touch -m -d` does to each (utimensat, atime left alone)
    service.reset_stats()
    for i, n in enumerate(names):
        os.utime(os.path.join(d, n), ns=(os.stat(os.path.join(d, n)).st_atime_ns,
                                         (1200000000 + i) * 10**9))
    assert int(os.stat(os.path.join(d, "f42")).st_mtime) == 1200000042
    sync(mount)
    assert requests(service, EXEC) <= 5
    got = sh(service, container, "cd %s && stat -c '%%n %%Y' f*" % rel(mount, d)).split("\n")
    assert got[:-1] == ["%s %d" % (n, 1200000000 + i) for i, n in enumerate(names)]
    # the same with 100 touch processes: each takes milliseconds to start,
    # so batches (at most 200 ms apart) cover several of them
    service.reset_stats()
    r = subprocess.run("cd '%s' && for i in $(seq 0 99); do touch -d @$((1100000000 + i)) "
                       "f$(printf %%02d $i) || exit 1; done" % d, shell=True)
    assert r.returncode == 0
    sync(mount)
    assert requests(service, EXEC) <= 20
    got = sh(service, container, "cd %s && stat -c '%%n %%Y' f*" % rel(mount, d)).split("\n")
    assert got[:-1] == ["%s %d" % (n, 1100000000 + i) for i, n in enumerate(names)]


def test_utimens_of_open_written_file_ends_with_asked_time(service, container, mount):
    # cp -p / tar: write, set the time, close: the upload must not move it
    p = mount.path(unique("cpp"))
    with open(p, "wb") as f:
        f.write(b"data")
        f.flush()
        os.utime(f.fileno(), (1000000000, 1100000000))
        os.fchmod(f.fileno(), 0o640)
    assert int(os.stat(p).st_mtime) == 1100000000
    sync(mount)
    assert sh(service, container, "stat -c '%a %Y %s' " + rel(mount, p)).split() == \
        ["640", "1100000000", "4"]
    # a write after the touch wins, as on a local disk
    os.utime(p, (1000000000, 1000000000))
    with open(p, "ab") as f:
        f.write(b"more")
    sync(mount)
    assert int(sh(service, container, "stat -c %Y " + rel(mount, p))) > 1500000000


def test_rename_keeps_queued_times(service, container, mount):
    # rsync: write a temporary name, set its times, rename it into place
    d = mount.path(unique("rs"))
    os.mkdir(d)
    service.reset_stats()
    for i in range(20):
        tmp = os.path.join(d, ".f%d.tmp" % i)
        write_file(tmp, b"%d" % i)
        os.utime(tmp, (1300000000 + i, 1300000000 + i))
        os.rename(tmp, os.path.join(d, "f%d" % i))
    assert int(os.stat(os.path.join(d, "f3")).st_mtime) == 1300000003
    sync(mount)
    assert requests(service, EXEC) <= 5
    got = sh(service, container, "cd %s && stat -c '%%n %%Y' f*" % rel(mount, d)).split("\n")
    assert sorted(got[:-1]) == sorted("f%d %d" % (i, 1300000000 + i) for i in range(20))
    # times queued below a directory follow its rename
    os.mkdir(os.path.join(d, "sub"))
    write_file(os.path.join(d, "sub", "g"), b"g")
    os.utime(os.path.join(d, "sub", "g"), (1250000000, 1250000000))
    os.utime(os.path.join(d, "sub"), (1240000000, 1240000000))
    os.rename(os.path.join(d, "sub"), os.path.join(d, "moved"))
    assert int(os.stat(os.path.join(d, "moved", "g")).st_mtime) == 1250000000
    sync(mount)
    assert sh(service, container, "cd %s/moved && stat -c %%Y . g" % rel(mount, d)).split() == \
        ["1240000000", "1250000000"]


def test_create_costs_one_batch_and_empty_file_lands(service, container, need_fuse):
    """sync_close: close() sends the new file at once, as a batch of one
    (an archive PUT into the mount's staging and the command that places
    it, mode included), so that the guest checks its way; no stat, no
    chmod (write-back batches many: the test after this one)."""
    m = mbtest.Mount(service, container, writeback=False)
    try:
        create_costs_one_batch(service, container, m)
    finally:
        assert m.unmount() == 0, m.log()
    assert not mbtest.sanitizer_report(m.log()), m.log()


def create_costs_one_batch(service, container, mount):
    d = mount.path(unique("new"))
    os.mkdir(d)
    write_file(os.path.join(d, "warm"), b"w")   # the staging directory is made (once)
    p = os.path.join(d, "empty")
    for umask, mode in (("077", "600"), ("022", "644")):
        service.reset_stats()
        r = subprocess.run("umask %s && : > '%s'" % (umask, p + mode), shell=True)
        assert r.returncode == 0
        assert requests(service, PUT) == 1 and requests(service, EXEC) == 1, service.stats()
        assert requests(service, STAT) == 0
        assert requests(service, "PATCH /containers/files/chmod") == 0
        assert sh(service, container, "stat -c '%F %s %a' " + rel(mount, p + mode)).strip() == \
            "regular empty file 0 " + mode
        assert os.path.getsize(p + mode) == 0


def test_empty_files_created_go_in_write_back_batches(service, container, wbmount):
    mount = wbmount
    d = mount.path(unique("new"))
    os.mkdir(d)
    write_file(os.path.join(d, "warm"), b"w")
    sync(mount)           # the guest's staging directory is made (once)
    service.reset_stats()
    p = os.path.join(d, "empty")
    r = subprocess.run("umask 077 && : > '%s' && umask 022 && : > '%s'" % (p, p + "2"), shell=True)
    assert r.returncode == 0
    sync(mount)
    # the batch(es) of write-back: an archive PUT and one command each,
    # modes inside the archive; no stat, no chmod
    puts, execs = requests(service, PUT), requests(service, EXEC)
    assert 1 <= puts <= 2 and execs == puts, service.stats()
    assert requests(service, STAT) == 0
    assert requests(service, "PATCH /containers/files/chmod") == 0
    assert sh(service, container, "stat -c '%F %s %a' " + rel(mount, p)).strip() == \
        "regular empty file 0 600"
    assert sh(service, container, "stat -c '%a %s' " + rel(mount, p + "2")).split() == ["644", "0"]
    assert os.path.getsize(p) == 0


def test_new_file_is_visible_before_its_upload(service, container, mount):
    d = mount.path(unique("vis"))
    os.mkdir(d)
    p = os.path.join(d, "f")
    with open(p, "wb") as f:
        f.write(b"abc")
        f.flush()
        assert os.listdir(d) == ["f"]
        assert os.path.getsize(p) == 3
        invalidate(mount)                    # the listing comes from the sandbox again
        assert os.listdir(d) == ["f"]
        os.chmod(p, 0o751)
        assert os.stat(p).st_mode & 0o777 == 0o751
        with pytest.raises(OSError) as e:
            os.rmdir(d)
        assert e.value.errno == errno.ENOTEMPTY
        # nothing on the sandbox yet (its directory may still be queued too:
        # the ENOTEMPTY needed no request)
        assert sh(service, container, "ls -A %s 2>/dev/null; true" % rel(mount, d)) == ""
    sync(mount)         # closed: queued for write-back
    assert sh(service, container, "stat -c '%a %s' " + rel(mount, p)).split() == ["751", "3"]


def test_unlink_of_new_file_before_its_upload(service, container, mount):
    d = mount.path(unique("gone"))
    os.mkdir(d)
    sync(mount)
    p = os.path.join(d, "tmp")
    service.reset_stats()
    with open(p, "wb") as f:
        f.write(b"scratch")
        f.flush()
        os.unlink(p)
        assert not os.path.exists(p)
        f.write(b" still writable")
    assert os.listdir(d) == []
    assert requests(service, PUT) == 0
    assert sh(service, container, "ls -A " + rel(mount, d)) == ""


def test_expired_listing_is_renewed_rather_than_a_stat_per_name(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["attr_timeout=1", "dir_timeout=1",
                                                  "negative_timeout=1"])
    try:
        d = m.path(unique("relist"))
        os.mkdir(d)                    # known empty, for 1 s
        time.sleep(1.2)
        service.reset_stats()
        began = time.monotonic()
        for i in range(20):
            write_file(os.path.join(d, "f%d" % i), b"x")
        # d's listing, and d itself (its attributes expired): a stat, or a
        # list of its parent; and one stat of the mount's root, whose mode
        # the kernel checks on every path (default_permissions). A loaded
        # machine that takes longer than the 1 s timeouts renews them once
        # more per second taken, still not once per name.
        again = int(time.monotonic() - began)
        lists, stats = requests(service, LIST), requests(service, STAT)
        assert lists <= 2 + again and stats <= 2 + again, (lists, stats, again)
        assert lists + stats <= 3 + 2 * again, (lists, stats, again)
        assert sorted(os.listdir(d)) == sorted("f%d" % i for i in range(20))
    finally:
        rc = m.unmount()
    assert rc == 0, m.log()
    assert not mbtest.sanitizer_report(m.log())


def test_exclusive_create_of_listed_name_fails(service, container, mount):
    d = mount.path(unique("excl"))
    os.mkdir(d)
    sync(mount)
    sh(service, container, "echo there > %s/x" % rel(mount, d))
    invalidate(mount)
    assert os.listdir(d) == ["x"]              # listing cached
    service.reset_stats()
    with pytest.raises(FileExistsError):
        os.open(os.path.join(d, "x"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    fd = os.open(os.path.join(d, "y"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    assert requests(service, STAT) == 0
    with pytest.raises(FileExistsError):
        os.open(os.path.join(d, "y"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    assert sh(service, container, "cat %s/x" % rel(mount, d)) == "there\n"


@pytest.mark.parametrize("writeback", [True, False], ids=["writeback", "sync_close"])
def test_new_file_with_failed_upload_fails_close(service, container, need_fuse, writeback):
    """sync_close: close() reports it; write-back: close() queues the file
    and the sync reports it."""
    m = mbtest.Mount(service, container, writeback=writeback)
    try:
        name = unique("lost")
        service.fault(route=PUT, count=3, status=403, error="file_access_denied")
        f = open(m.path(name), "wb")
        f.write(b"must not be lost\n")
        close_fails_or_sync_does(m, f, writeback)
        service.clear_faults()
        # the kernel is told to drop the name in the background, a few
        # seconds at most on a busy machine (kcache.h)
        deadline = time.monotonic() + 30
        while os.path.exists(m.path(name)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(m.path(name))
        assert sh(service, container, "ls -A /workspace").split().count(name) == 0
        kept = re.findall(r"upload of '/workspace/%s' failed: .*data kept in (\S+)" % name, m.log())
        assert kept and read_file(kept[0]) == b"must not be lost\n"
    finally:
        assert m.unmount() == 0, m.log()
    assert not mbtest.sanitizer_report(m.log()), m.log()


def test_sync_fails_when_the_batch_fails(service, container, mount):
    p = mount.path(unique("syncfail"))
    write_file(p, b"x")
    sync(mount)         # the file's own batch is not the one that fails
    service.fault(route=EXEC, count=1, status=503, error="execution_unavailable")
    os.utime(p, (1000000000, 1000000000))
    with pytest.raises(OSError) as e:
        sync(mount)
    assert e.value.errno == errno.EIO
    assert "cannot set the times of 1 file" in mount.log()
    assert "/workspace/" + os.path.basename(p) in mount.log()
    # the guest's time shows again, and the next sync has nothing to report
    assert int(os.stat(p).st_mtime) != 1000000000
    sync(mount)


def inode_numbers(path):
    r = subprocess.run(["ls", "-i", "-a", "-R", "."], cwd=path, capture_output=True)
    assert r.returncode == 0, r
    return r.stdout.decode()


def test_inode_numbers_are_stable(service, container, mount):
    d = mount.path(unique("ino"))
    os.makedirs(os.path.join(d, "sub"))
    for n in ("a", "b", "sub/c"):
        write_file(os.path.join(d, n), n.encode())
    os.symlink("a", os.path.join(d, "l"))
    first = inode_numbers(d)
    assert first == inode_numbers(d)
    ino = {n: os.lstat(os.path.join(d, n)).st_ino for n in ("a", "b", "sub", "sub/c", "l")}
    assert len(set(ino.values())) == 5 and min(ino.values()) > 1
    assert os.stat(mount.mountpoint).st_ino == 1
    sync(mount)   # on the sandbox for the second mount to see
    m2 = mbtest.Mount(service, container)
    try:
        assert inode_numbers(m2.path(os.path.basename(d))) == first
    finally:
        assert m2.unmount() == 0, m2.log()


def test_git_status_twice_reads_nothing(service, container, mount):
    name = unique("repo")
    # a 300-file work tree made on the sandbox, with old mtimes (no racily
    # clean entries), committed through the mount
    sh(service, container, "mkdir -p /workspace/%s/d && cd /workspace/%s && "
       "for i in $(seq 1 300); do echo $i > d/f$i; done && "
       "touch -d 2020-01-01 d/* d" % (name, name))
    repo = mount.path(name)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
               GIT_CONFIG_NOSYSTEM="1", HOME=repo)

    def git(*args):
        r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", repo] + list(args),
                           capture_output=True, env=env, timeout=300)
        assert r.returncode == 0, r
        return r.stdout.decode()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "c")
    assert git("status", "--porcelain") == ""
    service.reset_stats()
    assert git("status", "--porcelain") == ""
    assert requests(service, GET) == 0
    # a new mount shows the same inode numbers: git does not re-read the
    # work tree (only some of .git)
    sync(mount)     # .git's small files are on the sandbox (write-back)
    m2 = mbtest.Mount(service, container)
    try:
        env["HOME"] = m2.path(name)
        service.reset_stats()
        r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", m2.path(name),
                            "status", "--porcelain"], capture_output=True, env=env, timeout=300)
        assert r.returncode == 0 and r.stdout == b"", r
        assert requests(service, GET) < 30
    finally:
        assert m2.unmount() == 0, m2.log()


def test_a_listing_is_followed_only_while_it_lasts(service, container, need_fuse):
    """While a command runs, the mount looks at the directories it lists
    once a second; a look does not make the listing last longer, so a
    directory nobody lists again is no longer asked about once its
    listing expires (here 2 s), and a long quiet command costs its polls
    only."""
    m = mbtest.Mount(service, container, options=["dir_timeout=2"])
    try:
        d = m.path(unique("followed"))
        os.mkdir(d)
        write_file(os.path.join(d, "f"), b"x")
        sync(m)
        os.listdir(d)
        cmd = subprocess.Popen([mbtest.MBEXEC, "sh", "-c", "echo started; sleep 14"], cwd=d,
                               env=service.env(), stdout=subprocess.PIPE)
        try:
            assert cmd.stdout.readline() == b"started\n"
            time.sleep(4)          # the listing has expired
            service.reset_stats()
            time.sleep(6)
            execs = requests(service, "POST /containers/exec")
        finally:
            cmd.wait(60)
        assert execs <= 2, execs   # a poll, maybe a heartbeat; not one a second
    finally:
        assert m.unmount() == 0, m.log()


def test_a_walk_back_after_a_command_lists_in_one_request(service, container, mount):
    """After a command the mount forgets what it knew; the directories it
    held listed come back in one exec at the first lookup, not in one
    list request per level of the walk back to the command's directory."""
    top = unique("walkback")
    d = mount.path(top, "a", "b", "c")
    os.makedirs(d)
    write_file(os.path.join(d, "f"), b"v0\n")
    sync(mount)
    for p in (mount.path(top), mount.path(top, "a"), mount.path(top, "a", "b"), d):
        os.listdir(p)
    p = mbtest.run_mbexec(service, ["sh", "-c", "echo made > g; touch ../../../top"], cwd=d)
    assert p.returncode == 0, p
    service.reset_stats()
    assert sorted(os.listdir(d)) == ["f", "g"]
    assert os.path.exists(mount.path(top, "top"))
    assert read_file(os.path.join(d, "g")) == b"made\n"
    got = service.stats()["requests"]
    assert got == {GET: 1, EXEC: 1}, got


def test_an_edit_run_loop_after_ls_r_lists_no_level_on_its_own(service, need_fuse, request):
    """ls -lR of a tree, then rounds of: save a file three levels down,
    run a command there. Each round's relist lists the latest listings
    again, which keeps the tree's directories the latest; the directories
    above the command's are listed in the same exec, so the walk back
    from the mount's root lists no level on its own, round after round."""
    ident = service.create_container()   # a root of its own: small
    request.addfinalizer(lambda: service.delete_container(ident))
    sh(service, ident, "mkdir -p /workspace/w/tree && cd /workspace/w/tree && for d in $(seq 1 30); "
       "do mkdir d$d; for f in 1 2 3; do echo x > d$d/f$f; done; done")
    mount = mbtest.Mount(service, ident)
    request.addfinalizer(mount.unmount)
    r = subprocess.run(["ls", "-lR", mount.path("w", "tree")], capture_output=True, timeout=120)
    assert r.returncode == 0, r
    # and lookups in the tree (grep opens every file) since
    r = subprocess.run(["grep", "-r", "-c", "x", mount.path("w", "tree")], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r
    d = mount.path("w", "edit", "a", "b")
    os.makedirs(d)
    for rnd in range(4):
        service.reset_stats()
        write_file(os.path.join(d, "f.txt"), b"round %d\n" % rnd)
        p = mbtest.run_mbexec(service, ["cat", "f.txt"], cwd=d)
        assert p.returncode == 0 and p.stdout == b"round %d\n" % rnd, p
        got = service.stats()["requests"]
        if rnd:   # the first round's walk came from the mkdirs
            assert LIST not in got and STAT not in got, (rnd, got)
        if rnd > 1:   # the save's batch (a PUT, a command), the relist, the command
            assert sum(got.values()) <= 4, (rnd, got, [c[:200] for c in service.stats(commands=True)
                                                       ["execCommands"]])
