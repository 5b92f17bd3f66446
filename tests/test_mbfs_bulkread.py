"""mbfs bulk reads: when a program reads many files of a directory, their
small files come in one archive built on the sandbox (an exec and a few
1 MiB GETs) instead of a GET each; one file read still costs one GET. Each
test checks the bytes read as well as what they cost."""
import io
import os
import signal
import subprocess
import tarfile
import threading
import time

import pytest

import mbtest
from test_mbfs_helpers import finish, hold_writeback, read_file, sh, sync, unique, write_file

GET = "GET /containers/files"
LIST = "GET /containers/files/list"
EXEC = "POST /containers/exec"
REMOVE = "DELETE /containers/files/remove"
# files older than the archive's walk: those changed in its second are
# left out of it (they may change again within that second)
OLD = 1600000000


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def bmount(service, container, need_fuse):
    """A mount that, once unmounted, has left no archive piece on the
    sandbox (the last archive's go at unmount, the others with the next)."""
    m = mbtest.Mount(service, container)
    yield m
    finish(m)
    assert leftovers(service, container) == "0"


def seed(service, container, files, mtime=OLD):
    """Put files ({path under /workspace: bytes}) on the sandbox with one
    archive (not through the mount), all with the given mtime."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    tmp = "/tmp/%s.tar" % unique("seed")
    service.put_file(container, tmp, buf.getvalue())
    sh(service, container, "tar -xf %s -C /workspace && rm -f %s" % (tmp, tmp))


def content(name, n):
    line = ("%s says hello\n" % name).encode()
    return (line * (n // len(line) + 1))[:n]


def small_dir(n=50, size=lambda i: 100 + 37 * i):
    d = unique("bulk")
    return d, {"%s/f%02d.txt" % (d, i): content("%s/f%02d" % (d, i), size(i)) for i in range(n)}


def leftovers(service, container):
    return sh(service, container, "ls -d /tmp/.mbfs-dl-* 2>/dev/null | wc -l").strip()


def counts(service):
    """GETs, removals and the execs that are no listing (a cold directory's
    is a guest listing: one exec, which these tests do not count)."""
    stats = service.stats(commands=True)
    c = {k: mbtest.requests_for(stats, k) for k in (GET, EXEC, REMOVE)}
    c[EXEC] -= mbtest.guest_listings(stats)
    return c


def test_one_file_of_a_large_directory_costs_one_get(service, container, bmount):
    d, files = small_dir()
    seed(service, container, files)
    service.reset_stats()
    name = "%s/f07.txt" % d
    assert read_file(bmount.path(name)) == files[name]
    c = counts(service)
    assert c == {GET: 1, EXEC: 0, REMOVE: 0}, c


def test_all_files_of_a_directory_come_in_one_archive(service, container, bmount):
    d, files = small_dir()
    seed(service, container, files)
    service.reset_stats()
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], name
    c = counts(service)
    # the first file alone, then one archive: an exec and its one piece
    # (the next archive's exec, or unmount, removes it)
    assert c == {GET: 2, EXEC: 1, REMOVE: 0}, c
    assert int(leftovers(service, container)) <= 1   # removed by the next archive
    # read again: from the local copies
    service.reset_stats()
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], name
    assert counts(service)[GET] == 0


def test_files_read_in_bulk_can_be_changed_every_way(service, container, bmount):
    """The archive's small files are kept in memory; a change of one (write
    in place, append, truncate, mmap) first moves it to a file the journal
    keeps, and reaches the sandbox."""
    import mmap
    d, files = small_dir(n=12)
    seed(service, container, files)
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], name
    names = sorted(files)
    want = dict(files)
    with open(bmount.path(names[0]), "r+b") as f:
        f.write(b"IN PLACE")
    want[names[0]] = b"IN PLACE" + files[names[0]][8:]
    with open(bmount.path(names[1]), "ab") as f:
        f.write(b"appended\n")
    want[names[1]] = files[names[1]] + b"appended\n"
    os.truncate(bmount.path(names[2]), 5)
    want[names[2]] = files[names[2]][:5]
    with open(bmount.path(names[3]), "r+b") as f:
        with mmap.mmap(f.fileno(), 0) as mm:
            mm[0:6] = b"MAPPED"
    want[names[3]] = b"MAPPED" + files[names[3]][6:]
    fd = os.open(bmount.path(names[4]), os.O_RDWR)
    os.pwrite(fd, b"!", len(files[names[4]]) - 1)
    os.fsync(fd)
    os.close(fd)
    want[names[4]] = files[names[4]][:-1] + b"!"
    sync(bmount)
    for name in names:
        assert read_file(bmount.path(name)) == want[name], name
    got = {n: service.get_file(container, "/workspace/" + n)[1] for n in names[:5]}
    assert got == {n: want[n] for n in names[:5]}


def test_copies_in_memory_stay_within_a_quarter_of_the_fd_limit(service, container, need_fuse):
    """Each small copy kept in memory holds a file descriptor: a mount whose
    limit is 256 (hard: it cannot raise it) keeps at most 64 of them, and
    reads and writes go on."""
    dirs = {}
    for k in range(4):
        d, files = small_dir(n=60, size=lambda i: 50 + i)
        dirs.update(files)
    seed(service, container, dirs)
    m = mbtest.Mount(service, container, nofile=(256, 256))
    try:
        for name in sorted(dirs):
            assert read_file(m.path(name)) == dirs[name], name
        fd_dir = "/proc/%d/fd" % m.proc.pid

        def target(f):
            try:
                return os.readlink(os.path.join(fd_dir, f))
            except FileNotFoundError:   # closed since the listing (the daemon's own work)
                return ""
        mem = [f for f in os.listdir(fd_dir) if target(f).startswith("/memfd:")]
        assert 0 < len(mem) <= 64, len(mem)
        name = sorted(dirs)[-1]
        with open(m.path(name), "ab") as f:
            f.write(b"more\n")
        sync(m)
        assert service.get_file(container, "/workspace/" + name)[1] == dirs[name] + b"more\n"
    finally:
        finish(m)


def test_reads_during_an_archive_wait_for_it(service, container, bmount):
    d, files = small_dir(30)
    seed(service, container, files)
    names = sorted(files)
    service.reset_stats()
    assert read_file(bmount.path(names[0])) == files[names[0]]
    # the archive's command answers late: reads arriving meanwhile wait for
    # it (and those arriving after it take its copies), none GETs alone
    service.fault(route=EXEC, count=1, delayMs=1500)
    got = {}

    def rd(name):
        got[name] = read_file(bmount.path(name))
    first = threading.Thread(target=rd, args=(names[1],))
    first.start()
    deadline = time.monotonic() + 60
    while counts(service)[EXEC] == 0:
        assert time.monotonic() < deadline, "the archive never started"
        time.sleep(0.01)
    others = [threading.Thread(target=rd, args=(n,)) for n in names[2:]]
    for t in others:
        t.start()
    for t in others + [first]:
        t.join(120)
    assert got == {n: files[n] for n in names[1:]}
    c = counts(service)
    assert c == {GET: 2, EXEC: 1, REMOVE: 0}, c


def test_grep_r_of_a_tree_costs_a_few_archives(service, container, bmount):
    top = unique("tree")
    files = {}
    for i in range(10):
        for k in range(20):
            name = "%s/d%02d/s%d/f%03d.c" % (top, i, k % 2, k)
            body = content(name, 200 + 97 * k)
            if k % 5 == 0:
                body += b"needle\n"
            files[name] = body
    seed(service, container, files)
    service.reset_stats()
    r = subprocess.run(["grep", "-r", "-c", "needle", bmount.path(top)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r
    got = {}
    for line in r.stdout.decode().splitlines():
        path, n = line.rsplit(":", 1)
        got[os.path.relpath(path, bmount.mountpoint)] = int(n)
    assert got == {name: body.count(b"needle") for name, body in files.items()}
    c = counts(service)
    # 200 files: a GET, the first directory's archive, then its parent's
    # and their parent's (a tree walk escalates, each time with a GET of
    # its own first), each an exec and a piece; and the listing walk of
    # grep's second directory (an exec and a piece); a cold listing
    # before is an exec or a list
    lists = mbtest.requests_for(service.stats(), LIST)
    assert c[EXEC] + lists <= 10, (c, lists)
    assert c[REMOVE] == 0, c
    assert sum(c.values()) <= 14, c
    # the whole tree's archive brings its directories' listings: 31
    # directories, listed only before it came
    assert lists <= 8, lists
    for name, body in files.items():
        assert read_file(bmount.path(name)) == body, name
    assert int(leftovers(service, container)) <= 1


def test_a_file_changed_on_the_sandbox_after_the_archive_is_read_fresh(service, container, need_fuse):
    # attributes not cached: each open sees the sandbox's size and mtime now
    m = mbtest.Mount(service, container, options=["attr_timeout=0", "dir_timeout=0",
                                                  "negative_timeout=0"])
    try:
        d, files = small_dir(20)
        seed(service, container, files)
        names = sorted(files)
        for name in names[:3]:
            assert read_file(m.path(name)) == files[name]
        assert counts(service)[EXEC] >= 1   # the archive came
        same, other = names[10], names[11]
        new_same = content("changed", len(files[same]))
        new_other = b"a different size\n"
        sh(service, container, "printf '%%s' '%s' > /workspace/%s && printf '%%s' '%s' > /workspace/%s"
           % (new_same.decode(), same, new_other.decode(), other))
        files[same], files[other] = new_same, new_other
        for name in names:
            assert read_file(m.path(name)) == files[name], name
    finally:
        finish(m)
    assert leftovers(service, container) == "0"


def test_a_file_queued_in_write_back_is_read_as_written(service, container, need_fuse):
    m = mbtest.Mount(service, container, writeback=True)
    try:
        d, files = small_dir(20)
        seed(service, container, files)
        held = m.path(unique("held"))
        os.mkdir(held)
        hold_writeback(service, m, held)
        mine = sorted(files)[5]
        write_file(m.path(mine), b"written here\n")   # queued behind the held batch
        service.reset_stats()
        for name in sorted(files):
            want = b"written here\n" if name == mine else files[name]
            assert read_file(m.path(name)) == want, name
        assert counts(service)[EXEC] >= 1   # the archive came, with the old file
        sync(m)
        assert read_file(m.path(mine)) == b"written here\n"
        assert service.get_file(container, "/workspace/" + mine) == (200, b"written here\n")
    finally:
        finish(m)
    assert leftovers(service, container) == "0"


def test_hostile_names_and_files_left_out(service, container, bmount):
    d = unique("names")
    files = {"%s/f%02d" % (d, i): content("plain %d" % i, 300 + i) for i in range(10)}
    for name in ["with space", "new\nline", "-dash", "--", "L" * 150, "x" * 99 + "/" + "y" * 120,
                 "quote'and\"dq", "star*[a]?", "\u00e9t\u00e9", "odd\x01byte"]:
        files["%s/%s" % (d, name)] = content(name, 500)
    big = "%s/big.bin" % d
    files[big] = os.urandom(300 * 1024)   # past the archive's file size
    seed(service, container, files)
    sh(service, container, "cd /workspace/%s && ln -s f01 link && mkdir .mbfs-up-fake && "
       "echo staged > .mbfs-up-fake/f && echo staged > .mbfs-up-x" % d)
    service.reset_stats()
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], repr(name)
    assert read_file(bmount.path(d, "link")) == files["%s/f01" % d]
    assert ".mbfs-up-x" not in os.listdir(bmount.path(d))
    c = counts(service)
    assert c[EXEC] == 1, c
    # the first file, one piece, the big one and the one the archive skips
    # (a byte 001 in its name) each alone
    assert c[GET] <= 4, c


@pytest.mark.parametrize("fault", [
    dict(route=EXEC, count=1, status=500, error="internal_error", when="after"),
    dict(route=GET, count=20, status=500, error="internal_error", match=".mbfs-dl-"),
])
def test_a_failed_archive_falls_back_to_one_get_a_file(service, container, bmount, fault):
    d, files = small_dir(20)
    seed(service, container, files)
    # the directory's listing (one exec) comes first: the fault is the
    # archive's
    assert not os.path.lexists(bmount.path(d, "none"))
    service.fault(**fault)
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], name
    service.clear_faults()
    assert "bulk read of" in bmount.log()


def test_bulk_read_0_reads_each_file_alone(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["bulk_read=0"])
    try:
        d, files = small_dir(20)
        seed(service, container, files)
        service.reset_stats()
        for name in sorted(files):
            assert read_file(m.path(name)) == files[name], name
        c = counts(service)
        assert c == {GET: 20, EXEC: 0, REMOVE: 0}, c
    finally:
        finish(m)
    assert leftovers(service, container) == "0"


def guest_entries(service, container, top):
    """{relative path: (type, mode, size, mtime, link target)} of the
    sandbox's tree, for what a walk through the mount must show."""
    out = sh(service, container, "cd /workspace/%s && find . -mindepth 1 -printf "
             "'%%P\\t%%y\\t%%m\\t%%s\\t%%T@\\t%%l\\n'" % top)
    got = {}
    for line in out.splitlines():
        rel, y, mode, size, mtime, link = line.split("\t")
        got[rel] = (y, int(mode, 8), int(size) if y != "d" else None,
                    int(float(mtime)), link or None)
    return got


def mount_entries(root):
    import stat as st
    got = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            s = os.lstat(p)
            y = "l" if st.S_ISLNK(s.st_mode) else "d" if st.S_ISDIR(s.st_mode) else \
                "p" if st.S_ISFIFO(s.st_mode) else "f"
            got[os.path.relpath(p, root)] = (y, st.S_IMODE(s.st_mode), s.st_size if y != "d" else None,
                                             int(s.st_mtime), os.readlink(p) if y == "l" else None)
    return got


def test_the_listings_an_archive_brings_are_the_sandboxs(service, container, bmount):
    top = unique("ls")
    files = {}
    for i in range(4):
        for k in range(10):
            files["%s/d%d/f%02d" % (top, i, k)] = content("%d %d" % (i, k), 100 + k)
    files["%s/d1/sub/deep" % top] = b"deep\n"
    files["%s/d2/big" % top] = os.urandom(300 * 1024)
    seed(service, container, files)
    sh(service, container, "cd /workspace/%s && mkdir d3/empty && ln -s ../d0/f01 d3/link && "
       "ln -s nowhere d3/dangling && mkfifo d3/fifo && chmod 4755 d0/f03 && chmod 0600 d1/f04 && "
       "chmod 0700 d1/sub && mkdir d2/.mbfs-up-x && echo staged > d2/.mbfs-up-x/f && "
       "touch -h -d @1500000000 d3/link && touch -d @1400000000 d3/empty" % top)
    want = guest_entries(service, container, top)
    want = {k: v for k, v in want.items() if ".mbfs-up" not in k}
    # reading two files in each of two directories: the second archive is
    # the whole tree's, with the listings of the directories not seen yet
    # (the lookups in a second directory made a walk of the tree's
    # listings before it: one exec more)
    service.reset_stats()
    for name in ("d0/f00", "d0/f01", "d1/f00", "d1/f01"):
        assert read_file(bmount.path(top, name)) == files["%s/%s" % (top, name)]
    assert 2 <= counts(service)[EXEC] <= 3
    lists = mbtest.requests_for(service.stats(), LIST)
    # (readlink asks the sandbox each time, listings or not)
    got = mount_entries(bmount.path(top))
    assert mbtest.requests_for(service.stats(), LIST) == lists
    assert got == want
    for name, body in files.items():
        assert read_file(bmount.path(name)) == body, name


def test_an_archive_never_replaces_what_the_mount_sent_meanwhile(service, container, bmount):
    """The walk sees a file's old version; the mount's own new version (same
    size, same second) lands before the archive comes back. The archive's
    copy must not become the file's content, nor travel back on the next
    write."""
    d, files = small_dir(10)
    seed(service, container, files)
    os.listdir(bmount.path(d))
    target = bmount.path(d, "target")
    v1, v2 = b"A" * 64, b"B" * 64
    write_file(target, v1)
    os.utime(target, (OLD, OLD))
    sync(bmount)
    # v2's batch is slow; the archive's answer slower still
    service.fault(route="PUT /containers/files", count=1, match="wb-", delayMs=3000)
    write_file(target, v2)
    os.utime(target, (OLD, OLD))
    service.fault(route=EXEC, count=1, delayMs=6000)
    for name in sorted(files)[:3]:      # a bulk read: the walk sees v1
        assert read_file(bmount.path(name)) == files[name]
    r = subprocess.run([mbtest.MBFS, "--status", "--wait", bmount.mountpoint],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r
    assert sh(service, container, "cat /workspace/%s/target" % d) == v2.decode()
    assert read_file(target) == v2
    with open(target, "ab") as f:
        f.write(b"C")
    sync(bmount)
    assert sh(service, container, "cat /workspace/%s/target" % d) == (v2 + b"C").decode()


def test_pieces_a_killed_mount_left_go_at_the_next_mount(service, container, need_fuse, tmp_path):
    """kill -9 while an archive's pieces are on the sandbox: the journal
    noted their directory first, so the next mount of the same cache
    removes it."""
    cache = str(tmp_path / "cache")
    d, files = small_dir(40, size=lambda i: 20000 + i)
    seed(service, container, files)
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        service.fault(route=GET, count=5, delayMs=5000, match=".mbfs-dl-")
        def read_some():
            try:
                for name in sorted(files)[:3]:
                    read_file(m.path(name))
            except OSError:
                pass        # the mount is killed under it
        reader = threading.Thread(target=read_some, daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while leftovers(service, container) == "0":     # the archive is made
            assert time.monotonic() < deadline, "no archive was made"
            time.sleep(0.05)
    finally:
        m.kill9()
    service.clear_faults()
    assert leftovers(service, container) == "1"
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        assert leftovers(service, container) == "0"
        for name in sorted(files)[:5]:
            assert read_file(m2.path(name)) == files[name]
    finally:
        finish(m2)
    assert leftovers(service, container) == "0"


def walk_tree():
    top = unique("walk")
    files = {}
    for i in range(12):
        for k in range(3):
            files["%s/d%02d/s%d/f%d" % (top, i, k, k)] = content("%d %d" % (i, k), 50 + k)
        files["%s/d%02d/top.txt" % (top, i)] = b"top\n"
    return top, files


def test_a_walk_lists_the_rest_of_the_tree_in_one_go(service, container, bmount):
    """find, ls -R, git add: a cold listing next to a sibling listed cold
    brings the listings of their parent's whole subtree."""
    top, files = walk_tree()
    seed(service, container, files)
    sh(service, container, "cd /workspace/%s && mkdir d03/empty && ln -s ../d00/top.txt d01/link && "
       "mkfifo d02/fifo && chmod 0700 d04/s1 && touch -d @1400000000 d03/empty" % top)
    want = guest_entries(service, container, top)
    service.reset_stats()
    got = mount_entries(bmount.path(top))
    assert got == want
    stats = service.stats()
    # top, d00 and d00/s0 listed; d00/s1 makes a walk, of top (d00 and
    # top were listed cold just before: a walk down a tree), one exec
    # whose answer holds the listings (no piece to GET), instead of 49
    # more listings (and not a walk of d00, then one of top)
    # (each cold listing before the walk is an exec of its own: relist.h)
    assert mbtest.requests_for(stats, LIST) + mbtest.requests_for(stats, EXEC) <= 5, stats
    assert mbtest.requests_for(stats, GET) == 0, stats
    # what a walk brought is the sandbox's: a change there shows as a
    # listing's would, once the mount is told
    sh(service, container, "cd /workspace/%s && rm d05/top.txt && echo new > d06/s0/added" % top)
    subprocess.run([mbtest.MBEXEC, "true"], cwd=bmount.path(top), env=service.env(), check=True,
                   capture_output=True, timeout=120)   # it invalidates after the command
    assert sorted(os.listdir(bmount.path(top, "d05"))) == ["s0", "s1", "s2"]
    assert read_file(bmount.path(top, "d06", "s0", "added")) == b"new\n"
    # and once told, a walk right after is a walk again
    subprocess.run([mbtest.MBEXEC, "true"], cwd=bmount.path(top), env=service.env(), check=True,
                   capture_output=True, timeout=120)
    service.reset_stats()
    assert mount_entries(bmount.path(top)) == guest_entries(service, container, top)
    stats = service.stats()
    assert mbtest.requests_for(stats, LIST) <= 4, stats
    assert int(leftovers(service, container)) <= 1


def test_a_walk_with_bulk_read_0_lists_each_directory(service, container, need_fuse):
    top, files = walk_tree()
    seed(service, container, files)
    m = mbtest.Mount(service, container, options=["bulk_read=0"])
    try:
        service.reset_stats()
        assert len(mount_entries(m.path(top))) == len(files) + 12 * 4
        stats = service.stats()
        assert mbtest.requests_for(stats, EXEC) == 0, stats
        assert mbtest.requests_for(stats, LIST) >= 49, stats
    finally:
        finish(m)


def test_going_down_one_path_is_no_walk(service, container, bmount):
    top, files = walk_tree()
    seed(service, container, files)
    service.reset_stats()
    name = "%s/d03/s1/f1" % top
    assert read_file(bmount.path(name)) == files[name]
    stats = service.stats(commands=True)
    # each level listed alone (/, top, d03, s1), no archive or walk
    assert mbtest.guest_listings(stats) == 4, stats
    assert mbtest.requests_for(stats, EXEC) == 4, stats
    assert mbtest.requests_for(stats, GET) == 1, stats


def test_a_third_readdir_down_a_cold_tree_walks_it(service, container, bmount):
    """rm -rf, du: a readdir of top, of top/d00, then of top/d00/s0, each
    cold: the third walks top's subtree at once (one exec), and the rest
    of the tree asks for nothing more; not one listing per level until a
    sibling comes."""
    top, files = walk_tree()
    seed(service, container, files)
    want = guest_entries(service, container, top)
    os.stat(bmount.path(top))     # the root's listing
    service.reset_stats()
    for rel in ("", "d00", "d00/s0"):
        os.listdir(bmount.path(top, rel))
    stats = service.stats()
    # two cold listings through the guest (relist.h), then the walk
    assert mbtest.requests_for(stats, LIST) == 0, stats
    assert mbtest.requests_for(stats, EXEC) == 3, stats
    service.reset_stats()
    assert mount_entries(bmount.path(top)) == want
    assert service.stats()["requests"] == {}
