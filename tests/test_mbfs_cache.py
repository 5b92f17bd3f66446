"""mbfs: the daemon's caches (request economy), the control file, and
invalidation through it."""
import json
import os
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, invalidate, read_file, requests, sh, sync, unique, write_file

LIST = "GET /containers/files/list"
STAT = "GET /containers/files/stat"
GET = "GET /containers/files"


def test_ls_l_of_1500_entries_costs_one_request(service, container, mount):
    """A cold ls -l of a large directory lists it through the guest in one
    exec (relist.h): times to the nanosecond, one process on the guest
    where the list route runs a stat per entry, in pages of 1,000."""
    name = unique("many")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && "
       "for i in $(seq 1 1500); do echo $i > f$i; done && "
       "touch -d @1500000000.123456789 f7" % (name, name))
    invalidate(mount)
    os.stat(mount.path(name))
    service.reset_stats()
    r = subprocess.run(["ls", "-l", mount.path(name)], capture_output=True, timeout=120)
    assert r.returncode == 0, r
    lines = [l for l in r.stdout.decode().splitlines() if not l.startswith("total")]
    assert len(lines) == 1500
    assert requests(service, LIST) == 0 and requests(service, STAT) == 0
    assert requests(service, "POST /containers/exec") == 1
    assert os.stat(mount.path(name, "f7")).st_mtime_ns == 1500000000123456789
    # a second listing within the timeout is served from memory
    service.reset_stats()
    assert len(os.listdir(mount.path(name))) == 1500
    assert service.stats()["requests"] == {}


def test_repeated_reads_are_cached(service, container, mount):
    name = unique("cached")
    sh(service, container, "head -c 300000 /dev/urandom > /workspace/" + name)
    first = read_file(mount.path(name))
    service.reset_stats()
    for _ in range(3):
        assert read_file(mount.path(name)) == first
    assert requests(service, GET) == 0
    assert requests(service, STAT) == 0


def test_large_read_is_cached(service, container, mount):
    name = unique("bigcached")
    sh(service, container, "head -c 3000000 /dev/urandom > /workspace/" + name)
    first = read_file(mount.path(name))
    service.reset_stats()
    assert read_file(mount.path(name)) == first
    assert requests(service, GET) == 0
    assert requests(service, "POST /containers/exec") == 0


def test_negative_entries_are_cached(service, mount):
    missing = mount.path(unique("missing"))
    assert not os.path.exists(missing)
    service.reset_stats()
    for _ in range(3):
        assert not os.path.exists(missing)
    assert requests(service, STAT) == 0


def test_own_changes_are_seen_at_once(mount):
    name = mount.path(unique("own"))
    assert not os.path.exists(name)        # cache the negative entry
    write_file(name, b"x")
    assert os.path.exists(name)
    assert os.path.getsize(name) == 1
    with open(name, "ab") as f:
        f.write(b"yz")
    assert os.path.getsize(name) == 3
    os.unlink(name)
    assert not os.path.exists(name)


def test_control_file(service, container, mount):
    text = read_file(mount.path(CONTROL)).decode()
    doc = json.loads(text)
    assert doc["id"] == container["id"]
    assert doc["createdAt"] == container["createdAt"]
    assert doc["root"] == "/workspace"
    assert doc["apiUrl"] == service.url
    assert doc["mountpoint"] == os.path.realpath(mount.mountpoint)
    assert doc["pid"] == mount.proc.pid
    assert doc["version"]
    assert service.key not in text
    assert service.key[3:] not in text
    assert CONTROL not in os.listdir(mount.mountpoint)
    r = subprocess.run(["ls", "-a", mount.mountpoint], capture_output=True)
    assert CONTROL not in r.stdout.decode().split()
    assert os.stat(mount.path(CONTROL)).st_size == len(text)


def test_the_control_file_reads_as_it_was_when_opened(mount):
    """A program reading the control file in several calls (cat, Python's
    read()) gets one version of it, the one of its open, even when the
    mount's state changes between the calls: never the head of one and
    the tail of another."""
    before = json.loads(read_file(mount.path(CONTROL)))["writeback"]["sentFiles"]
    with open(mount.path(CONTROL), "rb", buffering=0) as f:
        head = f.read(1)
        for i in range(3):      # the count of files sent moves on meanwhile
            write_file(mount.path(unique("ctl")), b"x")
        sync(mount)
        doc = json.loads(head + f.read())
    assert doc["writeback"]["sentFiles"] == before, doc["writeback"]
    after = json.loads(read_file(mount.path(CONTROL)))["writeback"]["sentFiles"]
    assert after >= before + 3


def test_control_file_rejects_other_writes(mount):
    with pytest.raises(OSError):
        with open(mount.path(CONTROL), "w") as f:
            f.write("format c:\n")


def test_invalidate_shows_sandbox_changes_with_long_timeouts(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["attr_timeout=3600,dir_timeout=3600,negative_timeout=3600"])
    try:
        name = unique("inv")
        write_file(m.path(name), b"1\n")
        sync(m)  # on the sandbox before the sandbox changes it (write-back)
        assert read_file(m.path(name)) == b"1\n"
        newname = unique("new")
        assert not os.path.exists(m.path(newname))
        before = os.listdir(m.mountpoint)
        # what mbexec does: run a command, then write the line
        sh(service, container, "echo 2 > /workspace/%s; echo n > /workspace/%s" % (name, newname))
        assert read_file(m.path(name)) == b"1\n"     # still cached (1 h)
        with open(m.path(CONTROL), "w") as f:
            f.write("invalidate\n")
        assert read_file(m.path(name)) == b"2\n"      # same size, same second
        assert os.path.exists(m.path(newname))
        assert set(os.listdir(m.mountpoint)) == set(before) | {newname}
    finally:
        rc = m.unmount()
    assert rc == 0, m.log()
    assert not mbtest.sanitizer_report(m.log())


def test_invalidate_via_shell_redirect(service, container, mount):
    name = unique("redir")
    write_file(mount.path(name), b"a")
    sync(mount)  # on the sandbox before the sandbox changes it (write-back)
    read_file(mount.path(name))
    sh(service, container, "printf b > /workspace/" + name)
    r = subprocess.run("echo invalidate > '%s'" % mount.path(CONTROL), shell=True)
    assert r.returncode == 0
    assert read_file(mount.path(name)) == b"b"


def test_changes_seen_after_attr_timeout(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])
    try:
        name = unique("short")
        write_file(m.path(name), b"one")
        sync(m)  # on the sandbox before the sandbox changes it (write-back)
        assert read_file(m.path(name)) == b"one"
        sh(service, container, "echo longer-content > /workspace/" + name)
        assert read_file(m.path(name)) == b"longer-content\n"
    finally:
        rc = m.unmount()
    assert rc == 0, m.log()


def test_with_dir_timeout_0_an_ls_is_one_request(service, container, need_fuse, request):
    """dir_timeout=0 keeps no listing: an ls goes the list route's way
    alone, not through the guest first as well."""
    name = unique("nolist")
    sh(service, container, "mkdir /workspace/%s && touch /workspace/%s/a" % (name, name))
    m = mbtest.Mount(service, container, options=["dir_timeout=0"])
    request.addfinalizer(m.unmount)
    os.stat(m.path(name))
    for _ in range(2):
        service.reset_stats()
        assert os.listdir(m.path(name)) == ["a"]
        assert sum(service.stats()["requests"].values()) == 1, service.stats()["requests"]


def test_a_directory_too_large_for_the_guest_listing_is_asked_once(service, container, mount):
    """A cold ls of a directory of more than 4,096 entries: the guest's
    listing of it is refused for its size, and the list route lists it.
    The next cold ls (after a command) goes the list route's way at once,
    with no find on the guest whose answer would be thrown away."""
    name = unique("huge")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && "
       "seq 1 4100 | sed 's/^/f/' | xargs touch" % (name, name))
    invalidate(mount)
    os.stat(mount.path(name))
    for rnd in range(2):
        service.reset_stats()
        assert len(os.listdir(mount.path(name))) == 4100
        execs = requests(service, "POST /containers/exec")
        assert execs == (1 if rnd == 0 else 0), (rnd, service.stats()["requests"])
        invalidate(mount)
        os.stat(mount.path(name))
