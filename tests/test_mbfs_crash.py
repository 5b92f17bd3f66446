"""mbfs killed with data not yet uploaded (kill -9): the next mount of the
same container uploads it when the sandbox's file is still the one it was
written against, otherwise keeps it under CACHE_DIR/kept/ and says so (log
and control file). Staging an interrupted upload left is removed."""
import json
import os
import re
import signal
import subprocess
import threading

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, MiB, finish, guest_sha, hold_writeback, read_file, sh, sha, sync, unique

PUT = "PUT /containers/files"


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "cache")


def mount_with(service, container, cache_dir, *options):
    return mbtest.Mount(service, container, options=["cache_dir=" + cache_dir] + list(options))


def kill9(m):
    """kill -9 the daemon, then detach its dead mount (as a user would)."""
    m.kill9()
    assert not mbtest.sanitizer_report(m.log()), m.log()


def write_unclosed(path, data, mode=0o644, flags=os.O_WRONLY | os.O_CREAT):
    """Write data through the mount without closing: the fd stays open."""
    fd = os.open(path, flags, mode)
    for off in range(0, len(data), MiB):
        os.write(fd, data[off:off + MiB])
    return fd


def close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def remount_has(service, container, cache_dir, name, data):
    """Mount again after a kill -9: the sandbox's /workspace/NAME is then
    DATA. The second mount's log."""
    m2 = mount_with(service, container, cache_dir)
    try:
        assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    finally:
        log = finish(m2)
    return log


def kept_of(log, rpath):
    return re.findall(r"'%s' was written before mbfs stopped and not uploaded: "
                      r"([^;]*); data kept in (\S+)" % re.escape(rpath), log)


def control(m):
    return json.loads(read_file(m.path(CONTROL)))


def test_kill9_with_6mib_unclosed_then_remount_uploads_it(service, container, need_fuse, cache_dir):
    name = unique("crash-new")
    data = os.urandom(6 * MiB + 123)
    m = mount_with(service, container, cache_dir)
    fd = write_unclosed(m.path(name), data)
    kill9(m)
    close_quietly(fd)
    # never closed: the sandbox has not got it
    assert name not in sh(service, container, "ls -A /workspace").split()

    m2 = mount_with(service, container, cache_dir)   # another mountpoint
    try:
        assert guest_sha(service, container, "/workspace/" + name) == sha(data)
        assert sh(service, container, "stat -c %a /workspace/" + name) == "644\n"
        assert read_file(m2.path(name)) == data
        assert "kept" not in control(m2)
    finally:
        log = finish(m2)
    assert "'/workspace/%s' was written before mbfs stopped: uploaded now" % name in log
    # nothing is left for a third mount to replay
    assert [d for d in os.listdir(cache_dir) if d.startswith("run.")] == []
    assert os.listdir(os.path.join(cache_dir, "kept")) == []


def test_kill9_existing_file_unchanged_on_sandbox_is_uploaded(service, container, need_fuse, cache_dir):
    name = unique("crash-same")
    service.put_file(container, "/workspace/" + name, os.urandom(MiB))
    sh(service, container, "head -c %d /dev/urandom >> /workspace/%s" % (2 * MiB, name))
    m = mount_with(service, container, cache_dir)
    fd = os.open(m.path(name), os.O_RDWR)
    os.pwrite(fd, b"changed in the middle", MiB + 7)
    want = os.pread(fd, 4 * MiB, 0)   # the same handle: a close would upload
    assert len(want) == 3 * MiB
    kill9(m)
    close_quietly(fd)
    log = remount_has(service, container, cache_dir, name, want)
    assert "uploaded now" in log


def test_kill9_after_a_large_upload_and_a_change_still_knows_the_upload(service, container,
                                                                       need_fuse, cache_dir):
    """A large upload leaves its whole-file hash for later: the change
    after it works it out for the journal, so the next mount knows the
    sandbox's file (its mtime not the one noted) for our own upload and
    uploads the change rather than keeping it."""
    name = unique("crash-bigbase")
    data = os.urandom(3 * MiB + 5)
    m = mount_with(service, container, cache_dir)
    fd = os.open(m.path(name), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, data)
    os.fsync(fd)                      # uploaded; the copy stays open
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    os.pwrite(fd, b"changed after the upload", 10)
    want = os.pread(fd, len(data) + 1, 0)
    kill9(m)
    close_quietly(fd)
    # the same bytes, another mtime: only the hash says it is our upload
    sh(service, container, "touch -d @1000000000 /workspace/" + name)
    m2 = mount_with(service, container, cache_dir)
    try:
        assert guest_sha(service, container, "/workspace/" + name) == sha(want)
    finally:
        log = finish(m2)
    assert "'/workspace/%s' was written before mbfs stopped: uploaded now" % name in log


def test_kill9_file_changed_on_sandbox_meanwhile_is_kept(service, container, need_fuse, cache_dir):
    name = unique("crash-changed")
    service.put_file(container, "/workspace/" + name, b"original\n")
    m = mount_with(service, container, cache_dir)
    fd = os.open(m.path(name), os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"mine, never uploaded\n")
    kill9(m)
    close_quietly(fd)
    # someone else changes the file on the sandbox before the remount
    sh(service, container, "printf 'theirs, newer\\n' > /workspace/" + name)

    m2 = mount_with(service, container, cache_dir)
    try:
        ctl = control(m2)
        # the next sync reports it, as a failed batch's files; once
        waits = [subprocess.run([mbtest.MBFS, "--status", "--wait", m2.mountpoint],
                                capture_output=True, text=True, timeout=120) for _ in range(2)]
    finally:
        log = finish(m2)
    assert [w.returncode for w in waits] == [1, 0], waits
    assert "could not be uploaded" in waits[0].stdout
    assert ctl["writeback"]["failedFiles"] == 1 and name in ctl["writeback"]["lastError"]
    # theirs stays; mine is kept, named after its path, and reported
    assert sh(service, container, "cat /workspace/" + name) == "theirs, newer\n"
    kept = kept_of(log, "/workspace/" + name)
    assert len(kept) == 1, log
    why, path = kept[0]
    assert "changed on the sandbox" in why
    assert read_file(path) == b"mine, never uploaded\n"
    assert path.startswith(os.path.join(cache_dir, "kept", "workspace", name + "."))
    assert [k["file"] for k in ctl["kept"] if k["path"] == "/workspace/" + name] == [path]


def test_kill9_new_file_whose_name_was_taken_meanwhile_is_kept(service, container, need_fuse, cache_dir):
    name = unique("crash-taken")
    m = mount_with(service, container, cache_dir)
    fd = write_unclosed(m.path(name), b"created here\n")
    kill9(m)
    close_quietly(fd)
    service.put_file(container, "/workspace/" + name, b"created there\n")
    m2 = mount_with(service, container, cache_dir)
    log = finish(m2)
    assert sh(service, container, "cat /workspace/" + name) == "created there\n"
    kept = kept_of(log, "/workspace/" + name)
    assert kept and read_file(kept[0][1]) == b"created here\n", log


def test_kill9_of_another_generation_is_kept(service, need_fuse, cache_dir):
    """The slot was stopped and started again: that sandbox is gone, so the
    data cannot go anywhere; it is kept, never dropped."""
    ident = service.create_container()
    name = unique("crash-gen")
    m = mount_with(service, ident, cache_dir)
    fd = write_unclosed(m.path(name), b"for the old sandbox\n")
    kill9(m)
    close_quietly(fd)
    service.delete_container(ident)
    ident2 = service.create_container()
    try:
        assert ident2["id"] == ident["id"]
        m2 = mount_with(service, ident2, cache_dir)
        log = finish(m2)
    finally:
        service.delete_container(ident2)
    kept = kept_of(log, "/workspace/" + name)
    assert kept and "no longer running" in kept[0][0], log
    assert read_file(kept[0][1]) == b"for the old sandbox\n"


def test_kill9_during_large_upload_leaves_nothing_behind(service, container, need_fuse, cache_dir):
    """Killed while parts are going up: the next mount removes the staging
    (in the sandbox's /tmp, never in the user's tree) and uploads the file."""
    name = unique("crash-staging")
    data = os.urandom(5 * MiB + 1)
    m = mount_with(service, container, cache_dir)
    service.fault(route=PUT, count=100, match="mbfs-up", delayMs=20000)
    fd = write_unclosed(m.path(name), data)
    closer = threading.Thread(target=close_quietly, args=(fd,), daemon=True)
    closer.start()
    # wait until a part is on the sandbox (the delay is applied after it)
    staged = ""
    for _ in range(600):
        staged = sh(service, container, "ls /tmp/.mbfs-up-*/* 2>/dev/null || true")
        if "p.0" in staged:
            break
        threading.Event().wait(0.1)
    assert "p.0" in staged
    assert ".mbfs-up" not in sh(service, container, "ls -A /workspace")
    kill9(m)
    closer.join(30)
    service.clear_faults()
    m2 = mount_with(service, container, cache_dir)
    try:
        assert guest_sha(service, container, "/workspace/" + name) == sha(data)
        assert sh(service, container, "ls -d /tmp/.mbfs-up-* 2>/dev/null || true") == ""
        assert ".mbfs-up" not in sh(service, container, "ls -A /workspace")
    finally:
        finish(m2)


def test_clean_unmount_leaves_no_journal(service, container, need_fuse, cache_dir):
    m = mount_with(service, container, cache_dir)
    try:
        with open(m.path(unique("clean")), "wb") as f:
            f.write(b"x" * 1000)
        runs = [d for d in os.listdir(cache_dir) if d.startswith("run.")]
        assert len(runs) == 1
    finally:
        finish(m)
    assert [d for d in os.listdir(cache_dir) if d.startswith("run.")] == []


def list_attrs(p):
    try:
        return os.listxattr(p)
    except OSError:   # no user attributes on this filesystem
        return []


def journal_records(cache_dir):
    """(files carrying a record attribute, record files) in the run directories."""
    attrs, files = [], []
    for run in (d for d in os.listdir(cache_dir) if d.startswith("run.")):
        for name in os.listdir(os.path.join(cache_dir, run)):
            p = os.path.join(cache_dir, run, name)
            if name.endswith(".rec"):
                files.append(p)
            elif any(a.startswith("user.mbfs.rec.") for a in list_attrs(p)):
                attrs.append(p)
    return attrs, files


@pytest.fixture
def no_xattr_dir(tmp_path):
    """A directory on ramfs, which has no user attributes."""
    d = str(tmp_path / "ramfs")
    os.mkdir(d)
    if subprocess.run(["mount", "-t", "ramfs", "none", d], capture_output=True).returncode:
        pytest.skip("cannot mount ramfs here")
    yield d
    subprocess.run(["umount", "-l", d], capture_output=True)


@pytest.mark.parametrize("plain", [True, False], ids=["attribute", "record-file"])
def test_kill9_record_as_attribute_or_file_is_replayed(service, container, need_fuse, request, plain):
    """A dirty copy's record is an attribute of the copy; on a cache disk
    without user attributes it is a file of its own. After kill -9 the next
    mount uploads either."""
    cache_dir = request.getfixturevalue("cache_dir" if plain else "no_xattr_dir")
    name = unique("crash-rec")
    data = os.urandom(300 * 1024)
    m = mount_with(service, container, cache_dir)
    fd = write_unclosed(m.path(name), data)
    attrs, files = journal_records(cache_dir)
    assert (len(attrs), len(files)) == ((1, 0) if plain else (0, 1))
    kill9(m)
    close_quietly(fd)
    log = remount_has(service, container, cache_dir, name, data)
    assert "was written before mbfs stopped: uploaded now" in log
    assert [d for d in os.listdir(cache_dir) if d.startswith("run.")] == []


def test_kill9_after_a_link_of_a_queued_file_replays_both(service, container, need_fuse, cache_dir):
    """A queued file and a link of it share one local file with a record for
    each name; after kill -9 the next mount puts both on the sandbox, and a
    change made to one after the link is not in the other."""
    m = mount_with(service, container, cache_dir)
    d = unique("crash-link")
    os.mkdir(m.path(d))
    hold_writeback(service, m, m.path(d))
    with open(m.path(d, "a"), "wb") as f:
        f.write(b"shared\n")
    os.link(m.path(d, "a"), m.path(d, "b"))
    with open(m.path(d, "c"), "wb") as f:
        f.write(b"third\n")
    os.link(m.path(d, "c"), m.path(d, "e"))
    with open(m.path(d, "e"), "ab") as f:
        f.write(b"changed\n")
    kill9(m)
    m2 = mount_with(service, container, cache_dir)
    try:
        assert sh(service, container, "cd /workspace/%s && cat a b c e" % d) == \
            "shared\nshared\nthird\nthird\nchanged\n"
    finally:
        log = finish(m2)
    sent = re.findall(r"(\d+) files? written before mbfs stopped: uploaded now in one batch", log)
    assert sent and int(sent[0]) >= 4, log
    assert [x for x in os.listdir(cache_dir) if x.startswith("run.")] == []


def test_kill9_with_many_rewrites_queued_replays_them_in_a_batch(service, container, need_fuse, cache_dir):
    """Rewrites of files the sandbox has, queued at a kill -9, go up at the
    next mount in a batch that checks each one's base on the sandbox, not a
    stat, a PUT and a command each (2,000 of them held the mount for 175 s at
    20 ms). Each keeps the sandbox's mode; one the sandbox changed meanwhile
    is kept, not written over."""
    name = unique("crash-rewrites")
    g = "/workspace/" + name
    sh(service, container, "mkdir -p %s && cd %s && for i in $(seq 0 199); do echo old$i > f$i; "
       "chmod $((i %% 2 ? 600 : 755)) f$i; done" % (g, g))
    m = mount_with(service, container, cache_dir)
    d = m.path(name)
    os.listdir(d)
    hold_writeback(service, m, d)
    for i in range(200):
        with open(os.path.join(d, "f%d" % i), "r+b") as f:
            f.truncate(0)
            f.write(b"new%d\n" % i)
    kill9(m)
    sh(service, container, "echo theirs > %s/f7" % g)    # changed meanwhile
    service.clear_faults()
    service.reset_stats()
    m2 = mount_with(service, container, cache_dir)
    try:
        stats = service.stats()
        out = sh(service, container, "cd %s && for i in $(seq 0 199); do printf '%%s %%s\\n' "
                 "$(stat -c %%a f$i) $(cat f$i); done" % g).splitlines()
        for i in range(200):
            want = "theirs" if i == 7 else "new%d" % i
            assert out[i] == "%s %s" % ("600" if i % 2 else "755", want), (i, out[i])
        assert mbtest.requests_for(stats, "PUT /containers/files") <= 3, stats
        assert mbtest.requests_for(stats, "POST /containers/exec") <= 10, stats
        assert mbtest.requests_for(stats, "GET /containers/files/stat") <= 3, stats
    finally:
        log = finish(m2)
    kept = kept_of(log, g + "/f7")
    assert len(kept) == 1 and "changed on the sandbox" in kept[0][0], log
    assert read_file(kept[0][1]) == b"new7\n"


def test_kill9_with_many_new_files_queued_replays_them_in_a_batch(service, container, need_fuse, cache_dir):
    """Files queued at a kill -9 go up at the next mount together, not a
    stat, a PUT and a command each (2,000 of them took 133 s at 20 ms)."""
    name = unique("crash-many")
    m = mount_with(service, container, cache_dir)
    d = m.path(name)
    os.mkdir(d)
    sync(m)
    hold_writeback(service, m, d)
    want = {}
    for i in range(300):
        sub = os.path.join(d, "s%d" % (i % 7))
        os.makedirs(sub, exist_ok=True)
        p = os.path.join(sub, "f%03d" % i)
        data = b"%d\n" % i * (i % 50)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o640 if i % 2 else 0o755)
        os.write(fd, data)
        os.close(fd)
        os.utime(p, ns=(1500000000000000000 + i, 1500000000000000000 + i))
        want[os.path.relpath(p, d)] = data
    kill9(m)
    service.clear_faults()
    service.reset_stats()
    m2 = mount_with(service, container, cache_dir)
    try:
        stats = service.stats()
        g = "/workspace/" + name
        out = sh(service, container, "cd %s && find . -type f -name 'f*' -printf '%%P %%m %%T@\\n'" % g)
        got = {l.split()[0]: l.split()[1:] for l in out.splitlines()}
        assert len(got) == 300, out
        for i in range(300):
            rel = "s%d/f%03d" % (i % 7, i)
            assert got[rel][0] == ("640" if i % 2 else "755"), (rel, got[rel])
            assert got[rel][1].startswith("1500000000.000000"), (rel, got[rel])
            assert read_file(os.path.join(m2.path(name), rel)) == want[rel]
        assert mbtest.requests_for(stats, "PUT /containers/files") <= 3, stats
        assert mbtest.requests_for(stats, "POST /containers/exec") <= 8, stats
        assert "uploaded now in one batch" in m2.log(), m2.log()[-2000:]
    finally:
        finish(m2)
