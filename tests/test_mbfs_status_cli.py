"""`mbfs --status` as a user runs it: --json with the same facts as the
text, the log file named (and holding the daemon's lines), large uploads
in progress counted as pending and waited for, a stopped sandbox said so
(exit 1), and --wait's progress line only on a terminal.

Uploads are held by the service holding their parts' answers (a held fault);
the tests poll --status until it shows what they look for, with a deadline:
no timing is asserted."""
import hashlib
import json
import os
import pty
import re
import select
import subprocess
import tempfile
import threading
import time

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, MiB, read_file, sh, status, unique, until, write_file

pytestmark = pytest.mark.usefixtures("no_faults_left")

PUT = "PUT /containers/files"


def status_json(mount, *args):
    r = status(mount, "--json", *args)
    assert r.returncode in (0, 1), r
    assert r.stderr == "", r
    return r.returncode, json.loads(r.stdout)


def text_numbers(text):
    """The figures of the text form: pending files, sent files and batches."""
    pending = re.search(r"^pending: (\d+) files?", text, re.M)
    sent = re.search(r"^sent:    (\d+) files? in (\d+) batch(?:es)?", text, re.M)
    assert pending and sent, text
    return int(pending.group(1)), int(sent.group(1)), int(sent.group(2))


def test_json_has_the_facts_of_the_text(service, container, wb):
    d = wb.path(unique("json"))
    os.mkdir(d)
    for i in range(5):
        write_file(os.path.join(d, "f%d" % i), b"%d\n" % i)
    r = status(wb, "--wait", "--json")
    assert r.returncode == 0, r
    waited = json.loads(r.stdout)
    assert waited["pendingFiles"] == 0 and waited["error"] is None, waited
    text = status(wb)
    assert text.returncode == 0, text
    rc, doc = status_json(wb)
    assert rc == 0
    assert text_numbers(text.stdout) == (doc["pendingFiles"], doc["sentFiles"], doc["sentBatches"])
    assert doc["sentFiles"] >= 5
    assert doc["id"] == container["id"] and doc["createdAt"] == container["createdAt"]
    assert doc["mountpoint"] == wb.mountpoint and doc["root"] == "/workspace"
    assert "mount:   %s@%s:/workspace on %s (pid %d)" % (
        container["id"], container["createdAt"], wb.mountpoint, doc["pid"]) in text.stdout
    assert doc["stopped"] is False and doc["failedFiles"] == 0 and doc["kept"] == []
    assert "failed:  none" in text.stdout
    # -f: the log is the daemon's stderr, and both forms say so
    assert doc["logFile"] is None
    assert "log:     on the standard error of process %d" % doc["pid"] in text.stdout
    assert doc["keptDir"].endswith("/kept")


def test_not_a_mount_is_said_once_and_in_json(tmp_path):
    def st(*args):
        return subprocess.run([mbtest.MBFS, "--status"] + list(args), capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
    said = "'%s' is not an mbfs mount (or not yours)" % tmp_path
    r = st(str(tmp_path))
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "mbfs: %s\n" % said), r
    for extra in (["--json"], ["--wait", "--json"]):
        r = st(*extra, str(tmp_path))
        assert r.returncode == 2 and r.stderr == "mbfs: %s\n" % said, r
        assert json.loads(r.stdout) == {"mountpoint": str(tmp_path), "error": said}, r
    missing = str(tmp_path / "nope")
    r = st("--json", missing)
    said = "cannot use '%s': No such file or directory" % missing
    assert r.returncode == 2 and r.stderr == "mbfs: %s\n" % said, r
    assert json.loads(r.stdout)["error"] == said


def test_unknown_option_is_a_usage_error(wb):
    r = status(wb, "--jsn")
    assert r.returncode == 2 and "unknown option '--jsn' with --status" in r.stderr, r
    assert "[--json]" in r.stderr


def daemon_mount(service, ident, options):
    """mbfs without -f: the command returns once mounted."""
    mnt = tempfile.mkdtemp(prefix="mbfs-mnt-", dir=mbtest.tmp_base())
    spec = "%s@%s:/workspace" % (ident["id"], ident["createdAt"])
    args = [mbtest.MBFS, spec, mnt]
    for o in options:
        args += ["-o", o]
    r = subprocess.run(args, capture_output=True, env=service.env(), timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"", r    # a plain mount prints nothing
    pid = json.loads(read_file(os.path.join(mnt, CONTROL)))["pid"]
    return mnt, pid


def daemon_unmount(mnt, pid):
    mbtest.fusermount_u(mnt)
    deadline = time.monotonic() + 60
    while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % pid)
    os.rmdir(mnt)


def run_status(mnt, *args):
    return subprocess.run([mbtest.MBFS, "--status"] + list(args) + [mnt],
                          capture_output=True, text=True, timeout=120)


def notice_stopped(path):
    """Make the mount meet its gone generation: a file saved with fsync
    goes to the sandbox at once (and fails), whatever the caches hold."""
    try:
        with open(os.path.join(path, unique("probe")), "wb") as f:
            f.write(b"probe\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        pass


def test_log_file_is_named_and_holds_the_daemons_lines(service, need_fuse, tmp_path):
    """In the background the log goes to CACHE_DIR/mbfs.log (whether a
    syslog daemon listens or not); --status and the control file name it.
    The stopped generation gives the daemon a line to write."""
    ident = service.create_container()
    cache = tmp_path / "cache"
    mnt, pid = daemon_mount(service, ident, ["cache_dir=%s" % cache])
    try:
        log = str(cache / "mbfs.log")
        assert json.loads(read_file(os.path.join(mnt, CONTROL)))["logFile"] == log
        r = run_status(mnt)
        assert r.returncode == 0, r
        assert "log:     %s\n" % log in r.stdout, r.stdout
        assert json.loads(run_status(mnt, "--json").stdout)["logFile"] == log
        assert os.stat(log).st_mode & 0o777 == 0o600
        service.expire(ident)
        notice_stopped(mnt)
        line = "mbfs[%d]: error: container '%s' generation %s is no longer running" % (
            pid, ident["id"], ident["createdAt"])
        until(lambda: line in open(log).read(), "the daemon's line in " + log)
    finally:
        daemon_unmount(mnt, pid)
        service.delete_container(ident)


def test_stopped_sandbox_is_said_and_exits_1(service, need_fuse):
    ident = service.create_container()
    m = mbtest.Mount(service, ident)
    try:
        assert status(m).returncode == 0
        service.expire(ident)
        notice_stopped(m.mountpoint)
        r = until(lambda: (lambda r: r if r.returncode == 1 else None)(status(m)),
                     "--status to see the stopped generation")
        said = ("the sandbox '%s' generation %s is no longer running; nothing more can be "
                "sent; " % (ident["id"], ident["createdAt"]))
        assert "stopped: " + said in r.stdout, r.stdout
        assert re.search(r"; \d+ files? kept in /\S+/kept\n", r.stdout), r.stdout
        assert "failed:  none" not in r.stdout, r.stdout
        # --wait does not wait for what cannot be sent
        r = status(m, "--wait")
        assert r.returncode == 1 and said in r.stdout, r
        rc, doc = status_json(m, "--wait")
        assert rc == 1 and doc["stopped"] is True and doc["error"].startswith(said), doc
    finally:
        m.unmount()
        m.check_clean_log()
        service.delete_container(ident)


class Writer(threading.Thread):
    """Write a file and close it (`cp` of a local file, in a process of its
    own): close() waits for the upload of a large one. Not a thread of
    the test: the --status processes it starts meanwhile would inherit
    the open file, and their exec's close of it is a flush of a file half
    written, whose upload the service holds too."""

    def __init__(self, path, data, tmp):
        super().__init__(daemon=True)
        self.src = os.path.join(tmp, "writer-%d" % time.monotonic_ns())
        with open(self.src, "wb") as f:
            f.write(data)
        self.path, self.error = path, None
        self.start()

    def run(self):
        r = subprocess.run(["cp", self.src, self.path], capture_output=True, timeout=300)
        if r.returncode:
            self.error = r.stderr
        os.unlink(self.src)


def start_held_upload(service, mount, size):
    """A file of size bytes whose parts the service holds the answers of
    until the test clears the faults (or a --wait releases them); returns
    once --status shows it uploading. (Parts answered late instead would
    give a window of a few seconds, which a --status started on a machine
    busy with disk writes could miss.)"""
    service.fault(route=PUT, count=100000, match="mbfs-up", heldMs=60000)
    name = unique("large")
    data = os.urandom(size)
    w = Writer(mount.path(name), data, service.tmp)
    def seen():
        rc, doc = status_json(mount)
        return doc if doc["uploadingFiles"] == 1 else None
    doc = until(seen, "--status to show the upload")
    return name, data, w, doc


def test_large_upload_in_progress_is_pending_and_waited_for(service, container, wb):
    size = 8 * MiB
    name, data, w, doc = start_held_upload(service, wb, size)
    try:
        assert doc["pendingFiles"] >= 1 and doc["uploadingBytes"] == size, doc
        assert 0 < doc["pendingBytes"] <= size, doc
        assert 0 <= doc["uploadingSentBytes"] < size, doc
        r = status(wb)
        assert re.search(r"^pending: [1-9]\d* files?, ", r.stdout, re.M), r.stdout
        assert re.search(r"^         of which 1 uploading on its own: .* of 8\.0 MiB sent$",
                         r.stdout, re.M), r.stdout
    finally:
        service.clear_faults()
    # not a terminal: no progress line, only the outcome
    r = status(wb, "--wait")
    assert r.returncode == 0, r
    assert r.stderr == "", r
    assert re.search(r"^pending: 0 files, 0 bytes", r.stdout, re.M), r.stdout
    # the wait ended with the upload: the sandbox has every byte
    got = sh(service, container, "sha256sum < /workspace/%s" % name)
    assert hashlib.sha256(data).hexdigest() in got
    w.join(60)
    assert not w.is_alive() and w.error is None, w.error


def test_wait_shows_progress_on_a_terminal(service, container, wb):
    size = 8 * MiB
    name, data, w, doc = start_held_upload(service, wb, size)
    master, slave = pty.openpty()
    p = None
    try:
        p = subprocess.Popen([mbtest.MBFS, "--status", "--wait", wb.mountpoint],
                             stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        slave = None
        seen = b""
        deadline = time.monotonic() + 60
        while b"left to send" not in seen:
            assert time.monotonic() < deadline and p.poll() is None, seen
            if select.select([master], [], [], 0.1)[0]:
                seen += os.read(master, 4096)
        assert seen.startswith(b"\rwaiting: "), seen
        assert b"uploading" in seen and b"of 8.0 MiB" in seen, seen
        service.clear_faults()
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        # the line is erased at the end; the outcome goes to stdout
        seen += mbtest.read_pty_to_end(master)
        assert seen.endswith(b"\r"), seen
        assert "pending: 0 files" in out, out
    finally:
        service.clear_faults()
        if p and p.poll() is None:
            p.kill()
            p.wait()
        if slave is not None:
            os.close(slave)
        os.close(master)
    w.join(60)
    assert w.error is None, w.error
