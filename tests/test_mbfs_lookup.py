"""mbfs lookups of names in directories it has not listed yet: one listing
of the parent (through the guest, or the list route for a directory too
large for that) answers the lookups of all its entries (git lstat()s every
file of its index without reading a directory), a page-sized part of a
large directory is used without treating it as complete, and a parent that is
gone or no longer a directory gives the errno a local file system would.
Each test checks the answers against the sandbox as well as their cost."""
import errno
import os
import random
import subprocess
import threading
import time

import pytest

import mbtest
from test_mbfs_helpers import requests, sh, unique

STAT = "GET /containers/files/stat"
LIST = "GET /containers/files/list"
EXEC = "POST /containers/exec"


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def fresh(service, container, need_fuse):
    """A second mount, started after the test made its tree on the sandbox."""
    mounts = []

    def start(options=()):
        m = mbtest.Mount(service, container, options=options)
        mounts.append(m)
        return m
    yield start
    for m in mounts:
        rc = m.unmount()
        log = m.log()
        assert not mbtest.sanitizer_report(log), log
        assert rc == 0, "mbfs exited %s: %s" % (rc, log[-3000:])


def counts(service):
    """Listings (the list route's, and the guest's, one exec each: these
    tests write nothing, so no exec is a batch) and stats."""
    return {"list": requests(service, LIST) + requests(service, EXEC),
            "stat": requests(service, STAT)}


def test_lstat_walk_lists_each_directory_once(service, container, fresh):
    name = unique("walk")
    sh(service, container, "mkdir -p /workspace/%s && cd /workspace/%s && "
       "for d in 0 1 2 3 4 5; do mkdir d$d; for i in $(seq 1 50); do "
       "head -c $((i * 3 + d)) /dev/zero > d$d/f$i; done; chmod 600 d$d/f7; done"
       % (name, name))
    want = sh(service, container, "cd /workspace/%s && stat -c '%%n %%s %%a %%Y' d*/*"
              % name).split("\n")[:-1]
    files = [line.split(" ")[0] for line in want]
    assert len(files) == 300
    m = fresh()
    order = list(files)
    random.shuffle(order)
    service.reset_stats()
    got = {}
    for f in order:
        st = os.lstat(m.path(name, f))
        got[f] = "%s %d %o %d" % (f, st.st_size, st.st_mode & 0o7777, int(st.st_mtime))
    cost = counts(service)
    print("lstat walk of 300 files in 6 directories:", cost)
    assert [got[f] for f in files] == want
    assert cost["list"] <= 6 + 2, cost      # the directories, NAME and /
    assert cost["stat"] <= 3, cost


def test_cold_git_status(service, container, fresh):
    name = unique("repo")
    git = "git -c user.name=t -c user.email=t@example.com -c core.fsmonitor=false"
    sh(service, container,
       "mkdir -p /workspace/%s && cd /workspace/%s && "
       "for d in a b c; do mkdir $d; for i in $(seq 1 100); do echo $d$i > $d/f$i; done; done && "
       "touch -d 2020-01-01 a/* b/* c/* a b c && "
       "%s init -q && %s add . && %s commit -q -m c && "
       "echo changed > b/f5 && touch -d 2020-01-02 b/f5 && echo new > c/new"
       % (name, name, git, git, git))
    want = sh(service, container, "cd /workspace/%s && %s status --porcelain" % (name, git))
    assert want == " M b/f5\n?? c/new\n"
    m = fresh()
    repo = m.path(name)
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=repo)
    service.reset_stats()
    r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", repo, "status", "--porcelain"],
                       capture_output=True, env=env, timeout=300)
    cost = counts(service)
    print("cold git status of 300 files:", cost)
    assert r.returncode == 0, r
    assert r.stdout.decode() == want
    assert cost["stat"] <= 20, cost


def test_large_directory_first_page_and_beyond(service, container, fresh):
    # more than the guest listing takes (4,096): the list route's way
    name = unique("large")
    sh(service, container, "mkdir -p /workspace/%s && cd /workspace/%s && "
       "for i in $(seq 10000 14199); do echo $i > f$i; done" % (name, name))
    m = fresh()
    os.lstat(m.path(name))
    service.reset_stats()
    # sorted by name, the list route's first page holds f10000 .. f10999
    assert os.lstat(m.path(name, "f10500")).st_size == 6
    assert requests(service, EXEC) == 1   # the guest's find, too large
    assert counts(service) == {"list": 2, "stat": 0}
    assert os.lstat(m.path(name, "f12300")).st_size == 6
    assert counts(service) == {"list": 2, "stat": 1}
    assert os.lstat(m.path(name, "f10001")).st_size == 6
    assert os.lstat(m.path(name, "f14100")).st_size == 6
    with pytest.raises(FileNotFoundError):
        os.lstat(m.path(name, "f99999"))
    # the directory is known too large: no second find
    assert counts(service) == {"list": 2, "stat": 3}
    assert sorted(os.listdir(m.path(name))) == ["f%d" % i for i in range(10000, 14200)]


def test_missing_names_and_parents(service, container, fresh):
    name = unique("miss")
    sh(service, container, "mkdir -p /workspace/%s/gone /workspace/%s/file && "
       "touch /workspace/%s/a /workspace/%s/gone/x /workspace/%s/file/y"
       % ((name,) * 5))
    m = fresh()
    service.reset_stats()
    assert os.path.exists(m.path(name, "a"))
    with pytest.raises(FileNotFoundError):
        os.lstat(m.path(name, "nope"))
    assert counts(service) == {"list": 2, "stat": 0}
    with pytest.raises(FileNotFoundError):
        os.lstat(m.path("nope-" + name, "x"))
    # the kernel still knows gone/ and file/ as directories; the guest no
    # longer does
    os.lstat(m.path(name, "gone"))
    os.lstat(m.path(name, "file"))
    sh(service, container, "cd /workspace/%s && rm -r gone file && echo > file" % name)
    with pytest.raises(FileNotFoundError):
        os.lstat(m.path(name, "gone", "x"))
    with pytest.raises(OSError) as e:
        os.lstat(m.path(name, "file", "y"))
    assert e.value.errno == errno.ENOTDIR


def test_concurrent_lookups_share_one_listing(service, container, fresh):
    name = unique("conc")
    sh(service, container, "mkdir -p /workspace/%s/d && cd /workspace/%s/d && "
       "for i in $(seq 0 63); do echo $i > f$i; done" % (name, name))
    m = fresh(["attr_timeout=1", "dir_timeout=1", "negative_timeout=1"])
    names = [m.path(name, "d", "f%d" % (i * 8)) for i in range(8)]
    for p in names:
        os.lstat(p)
    # the kernel knows the names now and asks again for each (in
    # parallel, unlike first lookups in one directory) once it has all
    # expired
    time.sleep(1.2)
    os.lstat(m.path(name, "d"))
    service.reset_stats()
    # the first listing (the guest's) takes a while: the other lookups
    # arrive while it is in flight
    service.fault(route=EXEC, count=1, delayMs=300)
    start = threading.Barrier(8)
    sizes = {}

    def look(i):
        start.wait()
        sizes[i] = os.lstat(names[i]).st_size
    threads = [threading.Thread(target=look, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sizes == {i: len(str(i * 8)) + 1 for i in range(8)}
    assert counts(service) == {"list": 1, "stat": 0}


def test_a_lookup_answers_while_the_guests_exec_does_not(service, container, fresh):
    """A directory not listed yet lists through the guest (one exec); when
    that exec gets no answer (its slots taken, a stalled sandbox), the
    lookup still answers, through the list route, while the exec is still
    unanswered (it waited for it until op_timeout before)."""
    name = unique("stall")
    sh(service, container, "mkdir -p /workspace/%s/d && echo hi > /workspace/%s/d/f" % (name, name))
    m = fresh()
    os.listdir(m.path(name))          # the parent listed; d not yet
    service.reset_stats()
    service.fault(route=EXEC, count=1, heldMs=30000)
    try:
        assert os.stat(m.path(name, "d", "f")).st_size == 3
        assert service.held() == 1, "the lookup waited for the held exec"
        assert requests(service, LIST) == 1
    finally:
        service.release_held()


def test_a_lookup_after_a_command_answers_while_the_guests_exec_does_not(service, container, fresh):
    """After a command, the directories the mount held are listed again in
    one exec; when that exec gets no answer, the lookup that asked for it
    still answers while the exec is unanswered."""
    from test_mbfs_helpers import invalidate
    name = unique("stall2")
    sh(service, container, "mkdir -p /workspace/%s/d && echo hi > /workspace/%s/d/f" % (name, name))
    m = fresh()
    assert sorted(os.listdir(m.path(name, "d"))) == ["f"]
    invalidate(m)                     # what a command's end does: d is noted
    service.fault(route=EXEC, count=1, heldMs=30000)
    try:
        assert os.stat(m.path(name, "d", "f")).st_size == 3
        assert service.held() == 1, "the lookup waited for the held exec"
    finally:
        service.release_held()
