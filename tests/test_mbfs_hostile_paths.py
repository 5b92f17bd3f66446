"""Nothing the mount does leaves the mounted directory, whatever the
sandbox does to it: a directory the mount still shows (its cache) but
that the sandbox has swapped for a symlink to a directory outside is
never gone through (the change fails with ELOOP, or, where the mount
answers locally, does not touch the target), and staging in the
sandbox's /tmp is private: a planted /tmp/.mbfs-up symlink steers
nothing, and what killed mounts left is swept by the next one.

Every test compares the link's target byte for byte before and after."""
import errno
import os
import signal
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import read_file, sh, sync, unique, until, write_file

MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("no_faults_left")


def digest(service, container, rpath):
    """Names, types, modes, sizes, mtimes and contents under rpath."""
    return sh(service, container,
              "cd '%s' && find . -printf '%%p %%y %%m %%s %%T@\\n' | sort && "
              "find . -type f -exec sha256sum {} + | sort" % rpath)


@pytest.fixture
def swapped(service, container):
    """make(m): a directory d in m holding f (a file), sub (a directory)
    and big, shown by the mount (listed: cached), then replaced on the
    sandbox by a symlink to a directory outside the mount holding the
    same names: (d's mount path, the target's guest path, its digest)."""
    made = []

    def make(m):
        name = unique("swap")
        rd = "/workspace/" + os.path.relpath(m.path(name), m.mountpoint)
        target = "/root/" + unique("target")
        made.append((rd, target))
        sh(service, container,
           "mkdir -p '{d}/sub' '{t}/sub' && echo mine > '{d}/f' && "
           "echo outside > '{t}/f' && echo x > '{t}/sub/x' && "
           "chmod 644 '{t}/f' && touch -d @1000000000 '{t}/f' '{t}/sub'".format(d=rd, t=target))
        d = m.path(name)
        assert sorted(os.listdir(d)) == ["f", "sub"]
        os.stat(os.path.join(d, "f"))
        os.stat(os.path.join(d, "sub"))
        sh(service, container, "rm -rf '%s' && ln -s '%s' '%s'" % (rd, target, rd))
        return d, target, digest(service, container, target)
    yield make
    for rd, target in made:
        sh(service, container, "rm -rf '%s' '%s'" % (rd, target))


def sync_kept(m):
    """sync: it fails (EIO) when something queued could not land, and is
    kept (the refusals here)."""
    try:
        sync(m)
    except OSError as e:
        assert e.errno == errno.EIO, e


def refused(m, path):
    """The daemon's log names the path it refused."""
    rel = "/" + os.path.relpath(path, m.mountpoint)
    return [l for l in m.log().splitlines() if "refused" in l and rel in l]


def refused_now_or_at_sync(m, fn, *args):
    """Queued for the next batch (write-back): refused when it lands,
    reported at the sync; without write-back, refused at once."""
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == errno.ELOOP, e
    else:
        sync_kept(m)


def elooped(fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == errno.ELOOP, e.value
    return e.value


@pytest.mark.parametrize("op", ["unlink", "rmdir", "rename", "rename_in", "rename_over",
                                "chmod", "truncate0", "truncate", "symlink", "link"])
def test_a_swapped_directory_is_not_gone_through(service, container, mount, swapped, op):
    d, target, before = swapped(mount)
    f, sub = os.path.join(d, "f"), os.path.join(d, "sub")
    if op == "unlink":
        # queued for the next batch (write-back): refused when it lands,
        # reported at the sync; without write-back, refused at once
        try:
            os.unlink(f)
        except OSError as e:
            assert e.errno == errno.ELOOP, e
        else:
            sync_kept(mount)
            assert os.path.exists(f)     # the sandbox's answer shows again
    elif op == "rmdir":
        elooped(os.rmdir, sub)
    elif op == "rename":
        # a file's rename is queued like an unlink
        refused_now_or_at_sync(mount, os.rename, f, os.path.join(d, "g"))
        assert os.path.exists(f)
    elif op == "rename_in":
        src = mount.path(unique("src"))
        write_file(src, b"in\n")
        sync(mount)
        refused_now_or_at_sync(mount, os.rename, src, os.path.join(d, "g"))
        assert read_file(src) == b"in\n"
    elif op == "rename_over":
        src = mount.path(unique("over"))
        write_file(src, b"over\n")
        sync(mount)
        refused_now_or_at_sync(mount, os.rename, src, f)
        assert read_file(src) == b"over\n"
    elif op == "chmod":
        # a file's chmod is queued like an unlink
        refused_now_or_at_sync(mount, os.chmod, f, 0o600)
    elif op == "truncate0":
        elooped(os.truncate, f, 0)
    elif op == "truncate":
        elooped(os.truncate, f, 2)
    elif op == "symlink":
        elooped(os.symlink, "anywhere", os.path.join(d, "l"))
    elif op == "link":
        elooped(os.link, f, os.path.join(d, "h"))
    assert digest(service, container, target) == before
    assert refused(mount, f if op not in ("rmdir", "symlink", "rename_in")
                   else sub if op == "rmdir" else os.path.join(d, "l")
                   if op == "symlink" else os.path.join(d, "g")), mount.log()[-2000:]


def test_times_set_in_a_swapped_directory_touch_nothing_outside(service, container, mount, swapped):
    d, target, before = swapped(mount)
    os.utime(os.path.join(d, "f"), (1200000000, 1200000000))
    os.utime(os.path.join(d, "sub"), (1200000000, 1200000000))
    sync_kept(mount)   # the queued times have gone
    assert digest(service, container, target) == before
    until(lambda: refused(mount, os.path.join(d, "f")), "the refusal in the log")


def test_a_large_save_into_a_swapped_directory_fails_and_is_kept(service, container, mount, swapped):
    d, target, before = swapped(mount)
    data = os.urandom(3 * MiB + 5)
    with pytest.raises(OSError) as e:
        with open(os.path.join(d, "f"), "wb") as out:
            out.write(data)
    assert e.value.errno in (errno.ELOOP, errno.EIO), e.value
    assert digest(service, container, target) == before
    assert refused(mount, os.path.join(d, "f")), mount.log()[-2000:]
    # and nothing of it was left next to the target
    assert ".mbfs-up" not in sh(service, container, "ls -A '%s'" % target)


def test_a_small_save_in_a_batch_into_a_swapped_directory_is_kept(service, container, mount, swapped):
    d, target, before = swapped(mount)
    write_file(os.path.join(d, "f"), b"new\n")
    sync_kept(mount)
    assert digest(service, container, target) == before


def test_an_fsynced_small_save_into_a_swapped_directory_fails(service, container, mount, swapped):
    """Write-back: fsync() sends a small file at once (an editor's save):
    refused and kept, the target untouched."""
    d, target, before = swapped(mount)
    for name in ("f", "new"):
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"fsynced\n")
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno in (errno.ELOOP, errno.EIO), e.value
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
    sync_kept(mount)
    assert digest(service, container, target) == before


def test_a_sync_close_small_save_into_a_swapped_directory_fails(service, container, need_fuse, swapped):
    """sync_close: close() sends a small file at once: refused, kept."""
    m = mbtest.Mount(service, container, writeback=False)
    try:
        d, target, before = swapped(m)
        for name in ("f", "new"):
            with pytest.raises(OSError) as e:
                with open(os.path.join(d, name), "wb") as out:
                    out.write(b"closed\n")
            assert e.value.errno in (errno.ELOOP, errno.EIO), e.value
        assert digest(service, container, target) == before
    finally:
        assert m.unmount() == 0, m.log()
    assert not mbtest.sanitizer_report(m.log()), m.log()


def test_mkdir_in_a_swapped_directory(service, container, need_fuse, swapped):
    """sync_close: mkdir goes to the sandbox at once, and is refused."""
    m = mbtest.Mount(service, container, writeback=False)
    try:
        d, target, before = swapped(m)
        elooped(os.mkdir, os.path.join(d, "new"))
        elooped(os.mkdir, os.path.join(d, "sub", "new"))
        assert digest(service, container, target) == before
    finally:
        assert m.unmount() == 0, m.log()
    assert not mbtest.sanitizer_report(m.log()), m.log()


# ---- staging ----

def test_a_planted_staging_symlink_is_not_followed(service, container, mount):
    plant = "/workspace/" + unique("plant")
    sh(service, container, "rm -rf /tmp/.mbfs-up && mkdir %s && ln -s %s /tmp/.mbfs-up" % (plant, plant))
    try:
        small = mount.path(unique("small"))
        big = mount.path(unique("big"))
        data = os.urandom(2 * MiB + 3)
        write_file(small, b"small\n")
        write_file(big, data)
        sync(mount)
        rel = lambda p: "/workspace/" + os.path.relpath(p, mount.mountpoint)
        assert sh(service, container, "cat '%s'" % rel(small)) == "small\n"
        assert sh(service, container, "sha256sum < '%s'" % rel(big)).split()[0] == \
            mbtest_sha(data)
        assert sh(service, container, "ls -A %s" % plant) == ""
        assert sh(service, container, "readlink /tmp/.mbfs-up") == plant + "\n"
    finally:
        sh(service, container, "rm -f /tmp/.mbfs-up && rm -rf %s" % plant)


def mbtest_sha(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def staging_dirs(service, container):
    return set(sh(service, container,
                  "cd /tmp && for x in .mbfs-up .mbfs-up-* .mbfs-wb-*; do "
                  "[ -e \"$x\" ] && echo \"$x\"; done; true").split())


def test_the_staging_of_dead_mounts_is_swept_by_the_next(service, container, need_fuse):
    sh(service, container,
       "mkdir -p /tmp/.mbfs-up /tmp/.mbfs-up-0000dead /tmp/.mbfs-wb-0000dead /tmp/.mbfs-wb-0000live && "
       "echo r > /tmp/.mbfs-up/wb-0000dead.done && echo p > /tmp/.mbfs-up-0000dead/p.00000 && "
       "echo r > /tmp/.mbfs-wb-0000dead/wb-1.done && echo r > /tmp/.mbfs-wb-0000live/wb-1.done && "
       "touch -d '2 hours ago' /tmp/.mbfs-up/wb-0000dead.done /tmp/.mbfs-up-0000dead/p.00000 "
       "/tmp/.mbfs-wb-0000dead/wb-1.done /tmp/.mbfs-up /tmp/.mbfs-up-0000dead /tmp/.mbfs-wb-0000dead")
    m = mbtest.Mount(service, container)
    try:
        write_file(m.path(unique("first")), b"the first batch\n")
        sync(m)
        left = staging_dirs(service, container)
        assert not {".mbfs-up", ".mbfs-up-0000dead", ".mbfs-wb-0000dead"} & left, left
        # one a live mount may be using (changed within the hour) stays
        assert ".mbfs-wb-0000live" in left
    finally:
        assert m.unmount() == 0, m.log()
        sh(service, container, "rm -rf /tmp/.mbfs-wb-0000live")
    # a clean unmount removes its own
    assert not [x for x in staging_dirs(service, container) if x.startswith(".mbfs-wb-")]


def test_a_killed_mounts_batch_directory_goes_at_the_next_mount(service, container, need_fuse, tmp_path):
    cache = str(tmp_path / "cache")
    before = staging_dirs(service, container)
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    write_file(m.path(unique("killed")), b"before the kill\n")
    sync(m)
    mine = staging_dirs(service, container) - before
    assert len(mine) == 1 and next(iter(mine)).startswith(".mbfs-wb-"), mine
    m.kill9()
    assert mine <= staging_dirs(service, container)   # left behind
    m2 = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    try:
        until(lambda: not mine & staging_dirs(service, container), "the sweep of " + str(mine))
    finally:
        assert m2.unmount() == 0, m2.log()


def test_a_batch_directory_swapped_after_it_was_made(service, container, need_fuse):
    """The sandbox swaps the mount's own batch directory for a link into
    the workspace: that batch fails (its file kept), the archive its PUT
    left through the link is taken back, and the next batch goes to a
    fresh directory."""
    trap = "/workspace/" + unique("trap")
    sh(service, container, "mkdir -p %s" % trap)
    m = mbtest.Mount(service, container)
    try:
        write_file(m.path(unique("first")), b"the first batch\n")
        sync(m)
        (wb,) = [x for x in staging_dirs(service, container) if x.startswith(".mbfs-wb-")]
        sh(service, container, "rm -rf /tmp/%s && ln -s %s /tmp/%s" % (wb, trap, wb))
        second = unique("second")
        write_file(m.path(second), b"the second batch\n")
        sync_kept(m)
        assert sh(service, container, "ls -A %s" % trap) == ""
        assert "replaced the mount's batch directory" in m.log(), m.log()[-2000:]
        third = unique("third")
        write_file(m.path(third), b"the third batch\n")
        sync(m)
        assert sh(service, container, "cat /workspace/%s" % third) == "the third batch\n"
        assert sh(service, container, "ls -A %s" % trap) == ""
    finally:
        assert m.unmount() == 0, m.log()
        sh(service, container, "rm -rf %s /tmp/.mbfs-wb-*" % trap)
    assert not mbtest.sanitizer_report(m.log()), m.log()


FLIP_SECONDS = float(os.environ.get("MB_FLIP_SECONDS", "6"))


def test_a_directory_flipping_with_a_symlink_leads_nothing_out(service, container, mount):
    """The sandbox swaps a directory for a symlink to one outside and back,
    as fast as it can, while the mount makes directories, saves small and
    large files, fsyncs and sets times in it (MB_FLIP_SECONDS, 6 here,
    60 in `make stress`). A check before each act cannot see a swap that
    races it; every guest script acts from inside the directory, entered,
    so nothing lands outside. What was refused is kept and reported."""
    import threading
    name = unique("flip")
    rd = "/workspace/" + name
    target = "/root/" + unique("flipped")
    sh(service, container, "mkdir -p %s/d %s && echo seed > %s/d/seed && echo out > %s/f"
       % (rd, target, rd, target))
    before = digest(service, container, target)
    d = mount.path(name, "d")
    assert os.listdir(d) == ["seed"]
    flip = ("end=$(( $(date +%s) + SECONDS )); while [ $(date +%s) -lt $end ]; do "
            "mv {d} {d}.real && ln -s {t} {d} && rm {d} && mv {d}.real {d}; done"
            .format(d=rd + "/d", t=target))
    errors = []

    def flipper():
        left = FLIP_SECONDS
        while left > 0:     # an exec runs at most 60 s
            step = min(left, 20)
            r = service.exec(container, flip.replace("SECONDS", str(int(max(step, 1)))),
                             timeout_ms=int(step * 1000) + 30000)
            if r.get("exitCode") != 0:
                errors.append(r)
            left -= step
    th = threading.Thread(target=flipper)
    th.start()
    i = 0
    try:
        while th.is_alive():
            i += 1
            for op in ("small", "large", "fsync", "mkdir", "utime"):
                p = os.path.join(d, "%s%d" % (op, i))
                try:
                    if op == "small":
                        write_file(p, b"small %d\n" % i)
                    elif op == "large":
                        write_file(p, b"L" * (300 * 1024))
                    elif op == "fsync":
                        with open(p, "wb") as f:
                            f.write(b"fsync %d\n" % i)
                            f.flush()
                            os.fsync(f.fileno())
                    elif op == "mkdir":
                        os.mkdir(p)
                    else:
                        os.utime(os.path.join(d, "seed"), (1000000000 + i, 1000000000 + i))
                except OSError:
                    pass        # refused, or the name went with a swap
    finally:
        th.join()
    assert not errors, errors
    try:
        sync(mount)
    except OSError as e:
        assert e.errno == errno.EIO, e      # refused: kept, and said so
    assert i > 2
    assert digest(service, container, target) == before
    sh(service, container, "rm -rf %s %s" % (rd, target))
