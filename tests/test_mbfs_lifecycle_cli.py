"""mbfs's sandbox lifecycle commands, as a user runs them: --list (text and
--json) with the local mounts serving each generation, --stop (refused while
mounted here, --force, a generation that is not running, bad arguments),
the deadlines --create prints, a second mount on one mountpoint refused
(--create too, before it starts anything), and -v accepted."""
import calendar
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

import mbtest
from test_mbfs_helpers import read_file, unique


def run(service, args, env=None, timeout=60):
    return subprocess.run([mbtest.MBFS] + list(args), capture_output=True, timeout=timeout,
                          env=service.env(**(env or {})), stdin=subprocess.DEVNULL)


def name(ident):
    return "%s@%s" % (ident["id"], ident["createdAt"])


def running(service):
    status, doc = service.request("GET", "/containers")
    assert status == 200, (status, doc)
    return doc["containers"]


def listed(service, ident):
    return [c for c in running(service)
            if (c["id"], c["createdAt"]) == (ident["id"], ident["createdAt"])]


def lines_of(r):
    return [l for l in r.stderr.decode().splitlines() if l.strip() and "AddressSanitizer" not in l]


def wait_mounted(mnt, proc, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.ismount(mnt) and os.path.exists(os.path.join(mnt, ".mainbrella")):
            return
        if proc.poll() is not None:
            raise AssertionError("mbfs exited %s" % proc.returncode)
        time.sleep(0.05)
    raise AssertionError("not mounted")


def mbfs_mounts_at(path):
    with open("/proc/self/mountinfo") as f:
        return sum(1 for l in f if l.split(" ")[4] == path and " - fuse.mbfs " in l)


@pytest.fixture
def fresh(service):
    """A container of this test's own, stopped at the end if still running."""
    made = []

    def make():
        ident = service.create_container()
        made.append(ident)
        return ident
    yield make
    for ident in made:
        service.delete_container(ident)


@pytest.fixture
def mnt():
    path = tempfile.mkdtemp(prefix="mbfs-life-", dir=mbtest.tmp_base())
    yield path
    while os.path.ismount(path):
        if subprocess.run(["fusermount3", "-u", path], capture_output=True).returncode:
            subprocess.run(["fusermount3", "-uz", path], capture_output=True)
    os.rmdir(path)


def finish(m):
    rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    return rc


def test_list_shows_generation_deadlines_and_mount(service, fresh, need_fuse):
    ident = fresh()
    other = fresh()
    m = mbtest.Mount(service, ident)
    try:
        r = run(service, ["--list"])
        assert r.returncode == 0, r
        out = r.stdout.decode().splitlines()
        assert out[0].split() == ["ID", "GENERATION", "SIZE", "IMAGE", "STATUS", "DEADLINE",
                                  "IDLE", "MOUNTED", "ON"], out
        row = [l for l in out if l.split()[:2] == [ident["id"], ident["createdAt"]]]
        assert len(row) == 1, out
        row = row[0]
        # aligned: each column starts where its header does
        for col in ("GENERATION", "SIZE", "IMAGE", "STATUS", "DEADLINE", "IDLE"):
            at = out[0].index(col)
            assert row[at - 2:at] == "  " and row[at] != " ", (col, out)
        assert row.split()[2:5] == ["lite", "node", "running"], row
        entry = listed(service, ident)[0]
        expires = calendar.timegm(time.strptime(entry["expiresAt"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert time.strftime("%H:%M", time.localtime(expires)) + " (in " in row, row
        assert "after 10m idle" in row, row
        assert row.endswith(m.mountpoint), row
        # the other generation is listed, mounted nowhere
        row2 = [l for l in out if l.split()[:2] == [other["id"], other["createdAt"]]]
        assert len(row2) == 1 and row2[0].endswith(" -"), out

        r = run(service, ["--list", "--json"])
        assert r.returncode == 0, r
        doc = json.loads(r.stdout.decode())
        mine = [e for e in doc if (e["id"], e["createdAt"]) == (ident["id"], ident["createdAt"])]
        assert len(mine) == 1, doc
        e = mine[0]
        assert (e["size"], e["catalogId"], e["status"]) == ("lite", "node", "running"), e
        assert e["expiresAt"] == entry["expiresAt"] and e["idleTimeoutMs"] == 600000, e
        assert e["mounts"] == [m.mountpoint], e
        assert [x["mounts"] for x in doc if x["id"] == other["id"]] == [[]], doc
    finally:
        assert finish(m) == 0


def test_list_names_a_mount_of_a_stopped_generation(service, fresh, need_fuse):
    ident = fresh()
    m = mbtest.Mount(service, ident)
    try:
        service.delete_container(ident)
        r = run(service, ["--list"])
        assert r.returncode == 0, r
        assert name(ident) not in r.stdout.decode()
        err = r.stderr.decode()
        assert "'%s' mounts %s, which is no longer running" % (m.mountpoint, name(ident)) in err, err
        assert "fusermount3 -u '%s'" % m.mountpoint in err, err
    finally:
        finish(m)


def test_list_api_error(service):
    r = run(service, ["--list"], env={"MAINBRELLA_API_KEY": "mb_" + "0" * 64})
    assert r.returncode == 1, r
    lines = lines_of(r)
    assert len(lines) == 1 and lines[0].startswith("mbfs: cannot list containers"), lines
    assert r.stdout == b""


def test_stop_refuses_a_mounted_generation_unless_forced(service, fresh, need_fuse):
    ident = fresh()
    m = mbtest.Mount(service, ident)
    try:
        r = run(service, ["--stop", name(ident)])
        assert r.returncode == 1, r
        lines = lines_of(r)
        assert len(lines) == 1, lines
        assert "%s is mounted on '%s'" % (name(ident), m.mountpoint) in lines[0], lines
        assert "fusermount3 -u '%s'" % m.mountpoint in lines[0] and "--force" in lines[0], lines
        assert listed(service, ident), "refused, yet stopped"
        # the mount still works
        assert read_file(m.path(".mainbrella"))

        r = run(service, ["--stop", "--force", name(ident)])
        assert r.returncode == 0, r
        assert r.stdout.decode() == "stopped %s\n" % name(ident)
        assert "'%s' still mounts %s" % (m.mountpoint, name(ident)) in r.stderr.decode(), r
        assert not listed(service, ident)
    finally:
        finish(m)


def test_stop_an_unmounted_generation(service, fresh):
    ident = fresh()
    r = run(service, ["--stop", name(ident)])
    assert r.returncode == 0, r
    assert r.stdout.decode() == "stopped %s\n" % name(ident)
    assert not listed(service, ident)
    r = run(service, ["--list"])
    assert r.returncode == 0 and name(ident) not in r.stdout.decode(), r
    # once more: that generation is gone, and the message says so
    r = run(service, ["--stop", name(ident)])
    assert r.returncode == 1, r
    lines = lines_of(r)
    assert len(lines) == 1 and name(ident) in lines[0] and "not running" in lines[0], lines


def test_stop_an_old_generation_names_the_current_one(service, fresh):
    ident = fresh()
    old = dict(ident, createdAt="2020-01-01T00:00:00.000Z")
    r = run(service, ["--stop", name(old)])
    assert r.returncode == 1, r
    lines = lines_of(r)
    assert len(lines) == 1, lines
    assert "not running" in lines[0] and "now runs %s" % ident["createdAt"] in lines[0], lines
    assert listed(service, ident)


def test_stop_bad_arguments(service, fresh):
    ident = fresh()
    r = run(service, ["--stop", "bogus@2026-01-01T00:00:00.000Z"])
    assert r.returncode == 1, r
    lines = lines_of(r)
    assert len(lines) == 1 and "'bogus'" in lines[0] and "c1..c499" in lines[0], lines
    r = run(service, ["--stop", ident["id"]])
    assert r.returncode == 1, r
    lines = lines_of(r)
    assert len(lines) == 1 and "generation" in lines[0], lines
    r = run(service, ["--stop", "/var/tmp"])
    assert r.returncode == 1, r
    assert "not a mountpoint" in r.stderr.decode(), r
    r = run(service, ["--stop"])
    assert r.returncode == 2 and "missing ID@GENERATION" in r.stderr.decode(), r
    assert listed(service, ident), "a refused --stop stopped something"


def test_create_prints_deadlines(service, mnt, tmp_path, need_fuse):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    p = subprocess.Popen([mbtest.MBFS, "-f", "--create", mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=service.env(**env))
    ident = None
    try:
        first = p.stdout.readline().decode().strip()
        cid, _, gen = first.partition("@")
        assert cid and gen, first
        ident = {"id": cid, "createdAt": gen}
        hard = p.stdout.readline().decode()
        idle = p.stdout.readline().decode()
        entry = listed(service, ident)[0]
        expires = calendar.timegm(time.strptime(entry["expiresAt"][:19], "%Y-%m-%dT%H:%M:%S"))
        # the clock alone when the deadline is today; with its date when
        # it is past midnight (a run an hour before it)
        at = time.localtime(expires)
        clock = time.strftime("%H:%M" if time.strftime("%Y-%m-%d", at) == time.strftime("%Y-%m-%d")
                              else "%Y-%m-%d %H:%M", at)
        assert hard.startswith("hard deadline: %s (in " % clock), hard
        assert "the sandbox and its files are gone then" in hard, hard
        assert idle == "idle deadline: after 10m without requests (this mount makes one every 3m)\n", idle
        wait_mounted(mnt, p)
    finally:
        mbtest.fusermount_u(mnt)
        p.wait(30)
        if ident:
            service.delete_container(ident)


def test_second_mount_on_a_mountpoint_is_refused(service, fresh, need_fuse):
    ident = fresh()
    m = mbtest.Mount(service, ident)
    try:
        r = run(service, ["-f", name(ident) + ":/workspace", m.mountpoint], timeout=30)
        assert r.returncode == 1, r
        lines = lines_of(r)
        assert len(lines) == 1, lines
        assert lines[0] == ("mbfs: mountpoint '%s' already holds an mbfs mount of %s: unmount it "
                            "first (fusermount3 -u '%s')" % (m.mountpoint, name(ident), m.mountpoint)), lines
        assert mbfs_mounts_at(m.mountpoint) == 1
        # the first mount still works
        f = unique("still")
        with open(m.path(f), "w") as fh:
            fh.write("first\n")
        assert read_file(m.path(f)) == b"first\n"
    finally:
        assert finish(m) == 0


def test_create_on_a_mounted_dir_creates_nothing(service, fresh, tmp_path, need_fuse):
    ident = fresh()
    m = mbtest.Mount(service, ident)
    try:
        before = running(service)
        r = run(service, ["-f", "--create", m.mountpoint],
                env={"XDG_STATE_HOME": str(tmp_path / "state")}, timeout=30)
        assert r.returncode == 1, r
        assert r.stdout == b"", r
        lines = lines_of(r)
        assert len(lines) == 1 and "already holds an mbfs mount" in lines[0], lines
        assert running(service) == before
        assert mbfs_mounts_at(m.mountpoint) == 1
    finally:
        assert finish(m) == 0


@pytest.mark.parametrize("bad", [["-o", "bogus"], ["--bogus"], ["-o", "ro,max_thread=4"]])
def test_create_with_an_unknown_option_creates_nothing(service, mnt, tmp_path, bad, need_fuse):
    # a typo in an option libfuse would refuse is found before a
    # container is started, not after (it stayed running, unmounted)
    before = running(service)
    r = run(service, ["--create"] + bad + [mnt], env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert r.returncode == 1, r
    assert r.stdout == b"", r   # no ID@GENERATION: nothing was created
    word = "-o " + bad[1].split(",")[-1] if bad[0] == "-o" else bad[0]
    assert lines_of(r) == ["mbfs: unknown option '%s' (see mbfs --help)" % word], r
    assert running(service) == before
    assert not os.path.ismount(mnt)


def test_create_that_cannot_mount_says_the_sandbox_keeps_running(service, mnt, tmp_path,
                                                                  need_fuse):
    # a cache directory that cannot be made fails after the container
    # started: the user learns it runs and how to mount or stop it
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run(service, ["--create", "-o", "cache_dir=%s/sub" % blocker, mnt],
            env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert r.returncode == 1, r
    made = r.stdout.decode().splitlines()[0]
    cid, _, gen = made.partition("@")
    ident = {"id": cid, "createdAt": gen}
    try:
        assert listed(service, ident), made
        assert not os.path.ismount(mnt)
        assert lines_of(r)[-1] == ("mbfs: the new sandbox %s keeps running, unmounted: mount it "
                                   "with 'mbfs %s %s', or stop it with 'mbfs --stop %s'"
                                   % (made, made, mnt, made)), r
        # the advice works
        stop = run(service, ["--stop", made])
        assert stop.returncode == 0, stop
        assert not listed(service, ident)
    finally:
        if listed(service, ident):
            service.delete_container(ident)


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_is_accepted(service, fresh, mnt, flag, need_fuse):
    ident = fresh()
    p = subprocess.Popen([mbtest.MBFS, flag, "-f", name(ident) + ":/workspace", mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=service.env())
    try:
        wait_mounted(mnt, p)
        assert read_file(os.path.join(mnt, ".mainbrella"))
    finally:
        mbtest.fusermount_u(mnt)
        assert p.wait(30) == 0
    log = p.stdout.read().decode()
    assert "unknown option" not in log, log
    assert "GET /containers 200" in log, log
    r = run(service, ["--list", flag])
    assert r.returncode == 0 and "GET /containers 200" in r.stderr.decode(), r


def test_the_daemon_keeps_no_descriptor_of_its_caller(service, container, need_fuse, tmp_path):
    """A pipe the caller passed (a shell's 9>&1, a wrapper's fd) is closed
    by mbfs as it starts: the pipe's reader sees its end while the mount
    stays up (it used to wait for the unmount)."""
    import select
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    r, w = os.pipe()
    spec = "%s@%s:/workspace" % (container["id"], container["createdAt"])
    proc = subprocess.Popen([mbtest.MBFS, "-f", spec, mnt], pass_fds=(w,), env=service.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], 30)
        assert ready and os.read(r, 1) == b"", "mbfs still holds the caller's pipe"
        assert proc.poll() is None
    finally:
        os.close(r)
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        mbtest.fusermount_u(mnt)
        proc.wait(30)


def test_list_returns_while_a_mount_does_not_answer(service, fresh, need_fuse):
    """A mount whose daemon is stopped holds any read of its control file:
    --list gives them a few seconds (side by side, not one after the
    other), names each, and lists the rest; nothing it leaves behind holds
    the caller's output open."""
    ident = fresh()
    ms = [mbtest.Mount(service, ident) for _ in range(2)]
    for m in ms:
        mbtest.freeze(m.proc.pid)
    try:
        r = run(service, ["--list", "--json"], timeout=30)
    finally:
        for m in ms:
            mbtest.thaw(m.proc.pid)
    try:
        assert r.returncode == 0, r
        assert ident["id"] in [c["id"] for c in json.loads(r.stdout)], r
        err = r.stderr.decode()
        for m in ms:
            assert "'%s' does not answer" % m.mountpoint in err, err
    finally:
        for m in ms:
            finish(m)
