"""Nothing lost on a bad day: one transient error does not fail a save, a
stalled upload ends after op_timeout and keeps its data, a small full cache
disk loses nothing, upload staging never shows and never stays, and an
ambiguous `mbfs --create` starts one container, not two."""
import glob
import http.client
import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, MiB, control, finish, guest_sha, read_file, sh, sha, sync, unique, write_file

PUT = "PUT /containers/files"
REMOVE = "DELETE /containers/files/remove"


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.mark.parametrize("fault", [
    dict(status=503, error="files_unavailable", when="before"),
    dict(status=500, error="internal_error", when="before"),
    dict(status=502, error="bad_gateway", when="before"),
    dict(reset=True, afterBytes=0),
], ids=["503-before", "500-before", "502-before", "reset"])
@pytest.mark.parametrize("writeback", [True, False], ids=["writeback", "sync_close"])
def test_one_transient_error_on_a_small_put_does_not_fail_close(service, container, need_fuse,
                                                                fault, writeback):
    """With write-back the bad answer meets the batch's PUT and the sync
    must not fail; with sync_close it meets close()'s own PUT."""
    m = mbtest.Mount(service, container, writeback=writeback)
    try:
        name = unique("once")
        data = b"saved despite one bad answer\n" * 100
        service.fault(route=PUT, count=1, **fault)
        with open(m.path(name), "wb") as f:   # close() must not raise
            f.write(data)
        sync(m)                               # nor the sync (raises OSError)
        assert guest_sha(service, container, "/workspace/" + name) == sha(data)
        assert read_file(m.path(name)) == data
        # the bad answer went to mbfs (the batch's PUT or close's): this
        # PUT of the test's own gets a good one
        service.put_file(container, "/workspace/" + name + ".probe", b"probe\n")
    finally:
        finish(m)


def test_transient_errors_on_parts_of_a_large_file_are_retried(service, container, mount):
    name = unique("parts")
    data = os.urandom(3 * MiB + 5)
    service.fault(route=PUT, count=3, match="mbfs-up", status=503, error="files_unavailable")
    service.fault(route="POST /containers/exec", count=1, status=500, error="internal_error",
                  when="before")
    write_file(mount.path(name), data)
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)


def test_stalled_upload_gives_up_after_one_op_timeout_and_keeps_data(service, container, need_fuse):
    """Every part PUT hangs: the upload ends once nothing went through for
    op_timeout (one wave of requests, not op_timeout per part and retry)."""
    m = mbtest.Mount(service, container, options=["op_timeout=2"])
    name = unique("stalled")
    data = os.urandom(8 * MiB)
    try:
        f = open(m.path(name), "wb")
        f.write(data)
        service.fault(route=PUT, count=1000, match="mbfs-up", delayMs=5000)
        service.reset_stats()
        with pytest.raises(OSError):
            f.close()
        puts = mbtest.requests_for(service.stats(), PUT)
        service.clear_faults()
        assert puts <= 4, puts          # one per transfer thread
        assert name not in sh(service, container, "ls -A /workspace").split()
    finally:
        log = finish(m)
    kept = re.findall(r"upload of '/workspace/%s' failed: .*data kept in (\S+)" % name, log)
    assert kept and read_file(kept[0]) == data, log


def test_staging_is_never_visible_through_the_mount(service, container, mount):
    d = unique("stg")
    sh(service, container, "mkdir -p /workspace/%s/.mbfs-up && echo x > /workspace/%s/.mbfs-up-0123 "
       "&& echo y > /workspace/%s/real" % (d, d, d))
    assert os.listdir(mount.path(d)) == ["real"]
    assert not os.path.exists(mount.path(d, ".mbfs-up-0123"))
    assert not os.path.exists(mount.path(d, ".mbfs-up"))
    # a large upload stages in the sandbox's /tmp, not next to the file
    write_file(mount.path(d, "big"), os.urandom(2 * MiB))
    assert sorted(sh(service, container, "ls -A /workspace/" + d).split()) == \
        [".mbfs-up", ".mbfs-up-0123", "big", "real"]


def test_staging_a_failed_upload_left_goes_when_the_service_answers(service, container, mount):
    name = unique("leftover")
    service.fault(route=PUT, count=100, match="mbfs-up", status=403, error="file_access_denied")
    service.fault(route=REMOVE, count=2, status=503, error="files_unavailable")
    f = open(mount.path(name), "wb")
    f.write(os.urandom(2 * MiB))
    with pytest.raises(OSError):
        f.close()
    service.clear_faults()
    left = set(sh(service, container, "ls -d /tmp/.mbfs-up-* 2>/dev/null || true").split())
    assert left                                                   # could not be removed
    write_file(mount.path(unique("next")), b"the service answers again\n")
    sync(mount)          # the next upload (here a write-back batch) has gone
    # all of it has gone (a batch's report is in the mount's own
    # /tmp/.mbfs-wb-HEX until the next batch or the unmount)
    now = set(sh(service, container, "ls -d /tmp/.mbfs-up-* 2>/dev/null || true").split())
    assert not left & now, (left, now)
    assert ".mbfs-up" not in sh(service, container, "ls -A /workspace")
    assert "removed the staging of 1 failed upload" in mount.log()


def test_failed_upload_that_cannot_be_kept_stays_unsaved_and_says_so(service, container, need_fuse,
                                                                    tmp_path):
    """kept/ cannot take it (here: a file is in its way): the data stays in
    the journal, the file stays unsaved, and the next fsync uploads it."""
    cache = str(tmp_path / "cache")
    m = mbtest.Mount(service, container, options=["cache_dir=" + cache])
    name = unique("unkept")
    data = os.urandom(1500)
    try:
        os.rmdir(os.path.join(cache, "kept"))
        write_file(os.path.join(cache, "kept"), b"in the way\n")
        fd = os.open(m.path(name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            service.fault(route=PUT, count=1, status=403, error="file_access_denied")
            with pytest.raises(OSError):
                os.fsync(fd)
            line = [l for l in m.log().splitlines() if "upload of '/workspace/%s' failed" % name in l]
            assert len(line) == 1 and "cannot be moved under kept/" in line[0], m.log()
            journal = re.findall(r"data kept in (\S+)", line[0])[0]
            assert read_file(journal) == data
            os.fsync(fd)                    # still unsaved: tried again
        finally:
            os.close(fd)
        assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    finally:
        finish(m)


class EndlessListings:
    """A proxy in front of the service whose listings of directories named
    'endless' never end: each page says another follows (slowly)."""

    def __init__(self, target):
        up = urllib.parse.urlparse(target)
        self.count = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "content-type", "idempotency-key")}
                conn.request(self.command, self.path, body=body if body else None, headers=hdrs)
                r = conn.getresponse()
                data = r.read()
                url = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(url.query)
                if url.path == "/containers/files/list" and q.get("path", [""])[0].endswith("/endless") \
                        and r.status == 200:
                    outer.count += 1
                    doc = json.loads(data)
                    off, lim = int(q.get("offset", ["0"])[0]), int(q.get("limit", ["100"])[0])
                    if off:
                        doc["entries"] = []
                    doc["nextOffset"] = off + lim
                    data = json.dumps(doc).encode()
                    time.sleep(0.05)
                self.send_response(r.status)
                self.send_header("Content-Type", r.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_listing_that_never_ends_fails_within_op_timeout(service, container, need_fuse):
    proxy = EndlessListings(service.url)
    d = unique("list")
    # too large to list through the guest (relist.h): the list route's
    sh(service, container, "mkdir -p /workspace/%s/endless && cd /workspace/%s/endless && "
       "touch a && seq 1 4100 | sed 's/^/f/' | xargs touch" % (d, d))
    m = mbtest.Mount(service, container, options=["op_timeout=2", "api_url=" + proxy.url])
    try:
        with pytest.raises(OSError):
            os.listdir(m.path(d, "endless"))
        # bounded by op_timeout: tens of pages, not the thousand an offset
        # window allows (nor an endless loop)
        assert 1 < proxy.count < 200, proxy.count
    finally:
        finish(m)
        proxy.stop()


@pytest.fixture
def small_cache(tmp_path):
    d = str(tmp_path / "cache")
    os.mkdir(d)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=10m", "tmpfs", d], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs (needs root): %s" % r.stderr.decode().strip())
    yield d
    subprocess.run(["umount", "-l", d], capture_output=True)


def test_ten_mib_cache_on_tmpfs_loses_nothing(service, container, need_fuse, small_cache):
    m = mbtest.Mount(service, container, options=["cache_dir=" + small_cache])
    d = unique("tiny")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && head -c %d /dev/urandom > r0 "
       "&& head -c %d /dev/urandom > r1" % (d, d, 3 * MiB, 3 * MiB))
    try:
        # clean copies fill the cache first
        for i in range(2):
            assert len(read_file(m.path(d, "r%d" % i))) == 3 * MiB
        # then more is written than the cache holds, one file kept open
        # while others are written
        files = {"a": os.urandom(4 * MiB), "b": os.urandom(5 * MiB), "c": os.urandom(7 * MiB),
                 "d": os.urandom(3 * MiB + 17), "e": os.urandom(6 * MiB)}
        held = open(m.path(d, "a"), "wb")
        held.write(files["a"])
        write_file(m.path(d, "b"), files["b"])
        held.close()
        for n in "cde":
            write_file(m.path(d, n), files[n])
        for n, data in files.items():
            assert guest_sha(service, container, "/workspace/%s/%s" % (d, n)) == sha(data), n
        assert os.listdir(os.path.join(small_cache, "kept")) == []
    finally:
        log = finish(m)
    assert "data kept" not in log, log


# ---- mbfs --create ----

def create_env(service, state):
    return service.env(XDG_STATE_HOME=state, XDG_CACHE_HOME=os.path.join(state, "cache"))


def start_create(service, state, mnt, log):
    return subprocess.Popen([mbtest.MBFS, "-f", "--create", mnt], stdout=log, stderr=subprocess.STDOUT,
                            env=create_env(service, state))


def wait_mounted(proc, mnt):
    for _ in range(1800):
        if os.path.ismount(mnt) and os.path.exists(os.path.join(mnt, CONTROL)):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def containers(service):
    status, doc = service.request("GET", "/containers")
    assert status == 200, doc
    return doc["containers"]


def stop_create(proc, mnt, logf):
    mbtest.fusermount_u(mnt)
    try:
        rc = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    logf.close()
    with open(logf.name, "rb") as f:
        log = f.read().decode(errors="replace")
    assert not mbtest.sanitizer_report(log), log
    return rc, log


def test_ambiguous_create_makes_one_container(need_fuse, tmp_path):
    svc = mbtest.Service()
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    state = str(tmp_path / "state")
    logf = open(str(tmp_path / "mbfs.log"), "wb")
    try:
        # created, then answered 500: only the same key can find it again
        svc.fault(route="POST /containers", count=1, status=500, error="internal_error", when="after")
        proc = start_create(svc, state, mnt, logf)
        mounted = wait_mounted(proc, mnt)
        ctl = json.loads(read_file(os.path.join(mnt, CONTROL))) if mounted else {}
        listed = containers(svc)
        rc, log = stop_create(proc, mnt, logf)
        assert mounted, log
        assert rc == 0, log
        assert [(c["id"], c["createdAt"]) for c in listed] == [(ctl["id"], ctl["createdAt"])]
        assert glob.glob(os.path.join(state, "mbfs", "create-*.json")) == []
    finally:
        svc.stop()


def test_create_resumes_a_saved_unresolved_key(need_fuse, tmp_path):
    svc = mbtest.Service()
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    state = str(tmp_path / "state")
    try:
        # the first --create dies while its answer is on the way
        svc.fault(route="POST /containers", count=1, delayMs=20000)
        log1 = open(str(tmp_path / "first.log"), "wb")
        first = start_create(svc, state, mnt, log1)
        for _ in range(600):
            if containers(svc) or first.poll() is not None:
                break
            time.sleep(0.1)
        assert len(containers(svc)) == 1
        first.send_signal(signal.SIGKILL)
        first.wait()
        log1.close()
        saved = glob.glob(os.path.join(state, "mbfs", "create-*.json"))
        assert len(saved) == 1
        svc.clear_faults()

        log2 = open(str(tmp_path / "second.log"), "wb")
        second = start_create(svc, state, mnt, log2)
        mounted = wait_mounted(second, mnt)
        ctl = json.loads(read_file(os.path.join(mnt, CONTROL))) if mounted else {}
        listed = containers(svc)
        rc, log = stop_create(second, mnt, log2)
        assert mounted, log + "\nservice log:\n" + svc.log()[-4000:]
        assert rc == 0, log
        assert "resuming the unresolved container creation" in log
        assert [(c["id"], c["createdAt"]) for c in listed] == [(ctl["id"], ctl["createdAt"])]
        assert glob.glob(os.path.join(state, "mbfs", "create-*.json")) == []
    finally:
        svc.stop()


def test_a_close_returns_once_its_file_is_on_disk_and_closes_share_a_sync(service, container, need_fuse,
                                                                            tmp_path):
    """close() of a file written through the mount returns only once its
    working copy and record are on disk (a power cut then loses nothing),
    with the outbox log's lines before it (the directory's mkdir); the
    closes of a moment share that sync. mbfs runs under strace, which
    holds each fsync 1 s: the first close waits through its file's; seven
    closes made meanwhile sync their own files, and find the log synced."""
    trace = str(tmp_path / "strace.log")
    # LeakSanitizer cannot run under ptrace (make asan): leaks are looked
    # for in every other test
    asan = os.environ.get("ASAN_OPTIONS")
    wrap = (["env", "ASAN_OPTIONS=%s:detect_leaks=0" % asan] if asan else []) + \
        ["strace", "-f", "-qq", "-o", trace, "-e", "trace=fsync,fdatasync", "-e", "inject=fsync:delay_exit=1000000"]
    m = mbtest.Mount(service, container, wrap=wrap)
    try:
        d = m.path(unique("durable"))
        os.mkdir(d)
        before = control(m)["journal"]
        done = []

        def save(name):
            with open(os.path.join(d, name), "wb") as f:
                f.write(name.encode() * 100)
            done.append(name)
        first = threading.Thread(target=save, args=("first",))
        first.start()
        deadline = time.monotonic() + 60
        while control(m)["journal"]["commits"] == before["commits"]:
            assert time.monotonic() < deadline, "the close never asked for the disk"
            time.sleep(0.01)
        assert not done and first.is_alive()   # its fsync is still held
        others = [threading.Thread(target=save, args=("f%d" % i,)) for i in range(7)]
        for t in others:
            t.start()
        while control(m)["journal"]["commits"] < before["commits"] + 8:
            assert time.monotonic() < deadline, "the other closes never asked for the disk"
            time.sleep(0.01)
        j = control(m)["journal"]
        assert j["durable"] == before["durable"] and not done, j   # all eight wait
        for t in [first] + others:
            t.join(60)
        assert sorted(done) == sorted(["first"] + ["f%d" % i for i in range(7)])
        j = control(m)["journal"]
        assert j["durable"] == j["commits"], j
        # the log's line (the mkdir) synced once, by the first; the
        # seven and any batch meanwhile had no new line to sync
        assert j["syncs"] - before["syncs"] == 1, j
        sync(m)
        assert sh(service, container, "cat %s/first" % ("/workspace/" + os.path.basename(d))) == "first" * 100
    finally:
        finish(m)
    with open(trace) as f:
        fsyncs = [line for line in f if "fsync(" in line]
    # each close's own file, and the run directory's once
    assert len(fsyncs) >= 8 + 1, fsyncs
