"""mbfs and its neighbours: other local users, the API key, names the API
would alias, a service (or a proxy) that answers oddly, and where the log
goes when nobody watches the terminal."""
import errno
import http.client
import http.server
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

import mbtest
from test_mbfs_helpers import CONTROL, read_file, sh, status_wait, sync, unique, write_file

NOBODY = 65534


pytestmark = pytest.mark.usefixtures("no_faults_left")


def sandbox_requests(service):
    """Requests on the routes a mount uses for files (not /containers)."""
    reqs = service.stats().get("requests", {})
    return sum(n for route, n in reqs.items() if "/containers/files" in route or "/containers/exec" in route)


def as_nobody(script, *args):
    """Run a python snippet as uid/gid 65534 without groups; its stdout as JSON."""
    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    r = subprocess.run([mbtest.PYTHON, "-c", script] + list(args), capture_output=True,
                       preexec_fn=drop, cwd="/", timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


TRY_AS_OTHER = r"""
import errno, json, os, sys
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def read(p):
    with open(p, "rb") as f:
        return f.read()
def append(p):
    with open(p, "ab") as f:
        f.write(b"intruder")
def write_control(p):
    with open(p, "w") as f:
        f.write("invalidate\n")
secret, public, control = sys.argv[1:4]
print(json.dumps({
    "read_secret": attempt(lambda: read(secret)),
    "append_secret": attempt(lambda: append(secret)),
    "unlink_secret": attempt(lambda: os.unlink(secret)),
    "read_control": attempt(lambda: read(control)),
    "write_control": attempt(lambda: write_control(control)),
    "read_public": read(public).decode(),
}))
"""


def test_allow_other_still_checks_permissions(service, container, need_fuse):
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts with allow_other and switches to uid 65534")
    m = mbtest.Mount(service, container, options=["allow_other"])
    try:
        d = m.path(unique("perm"))
        os.mkdir(d, 0o755)
        secret, public = os.path.join(d, "secret"), os.path.join(d, "public")
        fd = os.open(secret, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        os.write(fd, b"mine alone\n")
        os.close(fd)
        fd = os.open(public, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, b"for everyone\n")
        os.close(fd)
        got = as_nobody(TRY_AS_OTHER, secret, public, m.path(CONTROL))
        assert got == {"read_secret": "EACCES", "append_secret": "EACCES",
                       "unlink_secret": "EACCES", "read_control": "EACCES",
                       "write_control": "EACCES", "read_public": "for everyone\n"}
        # the remote files belong to the guest's root; the mount shows them
        # as the mounting user's, and the kernel checks the mode bits
        assert os.stat(secret).st_uid == os.getuid()
        assert os.stat(m.path(CONTROL)).st_mode & 0o777 == 0o600
        # and the mounting user still has everything
        assert read_file(secret) == b"mine alone\n"
        assert json.loads(read_file(m.path(CONTROL)))["id"] == container["id"]
        sync(m)          # queued at close (write-back)
        assert sh(service, container, "cat '%s/secret'" % ("/workspace/" + os.path.basename(d))) == "mine alone\n"
    finally:
        rc = m.unmount()
    m.check_clean_log()
    assert rc == 0, m.log()


def environ_of(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return f.read()


def test_api_key_leaves_the_environment_of_mbfs_and_mbexec(service, container, mount):
    key = service.key.encode()
    assert key in service.env()["MAINBRELLA_API_KEY"].encode()   # given through the environment
    assert key not in environ_of(mount.proc.pid)
    p = subprocess.Popen([mbtest.MBEXEC, "sh", "-c", "echo started; sleep 3"], cwd=mount.mountpoint,
                         env=service.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # output has come back: mbexec has long read its key
        assert p.stdout.readline() == b"started\n"
        assert key not in environ_of(p.pid)
    finally:
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err.decode()
    assert not mbtest.sanitizer_report(err.decode())


def test_names_that_are_not_utf8_are_refused_before_any_request(service, container, mount):
    d = unique("utf8")
    os.mkdir(mount.path(d))
    base = os.fsencode(mount.path(d))
    # what the service would turn x\xff and x\xfe into (U+FFFD)
    alias = base + b"/x\xef\xbf\xbd"
    write_file(alias, b"keep me\n")
    src = base + b"/src"
    write_file(src, b"source\n")
    bad = [base + b"/x\xff", base + b"/x\xfe", base + b"/\xc0\xaf"]
    sync(mount)      # their write-back batch is not counted below

    service.reset_stats()
    attempts = []
    for p in bad:
        attempts += [
            ("open", lambda p=p: open(p, "wb").close()),
            ("mkdir", lambda p=p: os.mkdir(p)),
            ("mknod", lambda p=p: os.mknod(p, 0o600)),
            ("rename to", lambda p=p: os.rename(src, p)),
            ("rename from", lambda p=p: os.rename(p, src)),
            ("link", lambda p=p: os.link(src, p)),
            ("symlink name", lambda p=p: os.symlink(b"target", p)),
            ("stat", lambda p=p: os.stat(p)),
        ]
    attempts.append(("symlink target", lambda: os.symlink(b"t\xff", base + b"/link")))
    for what, fn in attempts:
        with pytest.raises(OSError) as e:
            fn()
        assert e.value.errno == errno.EILSEQ, what
    assert sandbox_requests(service) == 0
    assert not os.path.lexists(base + b"/link")
    assert read_file(alias) == b"keep me\n"
    assert read_file(src) == b"source\n"
    assert sh(service, container, "cat '/workspace/%s/x\ufffd'" % d) == "keep me\n"


# ---- a proxy between mbfs and the service that can change answers ----

class Proxy:
    """HTTP/1.1 between mbfs (api_url=) and the local service; edit(method,
    target, status, body) may return another body for an answer."""

    def __init__(self, upstream, edit):
        up = urllib.parse.urlsplit(upstream)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else None

            def forward(self):
                body = self.body()
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "transfer-encoding", "content-length")}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=150)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                    out = proxy.edit(self.command, self.path, r.status, data)
                    if out is not None:
                        data = out
                    self.send_response(r.status)
                    for k, v in r.getheaders():
                        if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = forward

        self.edit = edit
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def query_path(target):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    return q.get("path", [""])[0]


def proxied_mount(service, container, edit, options=()):
    proxy = Proxy(service.url, edit)
    try:
        return proxy, mbtest.Mount(service, container, options=["api_url=" + proxy.url] + list(options))
    except Exception:
        proxy.close()
        raise


def test_listing_drops_impossible_names_with_a_warning(service, container, need_fuse):
    # more entries than the guest listing takes: the list route's way
    d = unique("odd")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && touch a b c && "
       "seq 1 4100 | sed 's/^/f/' | xargs touch" % (d, d))

    def edit(method, target, status, body):
        if method != "GET" or not target.startswith("/containers/files/list") or status != 200 \
                or query_path(target) != "/workspace/" + d \
                or urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get("offset", ["0"]) != ["0"]:
            return None
        doc = json.loads(body)
        first = doc["entries"][0]
        for name in ("", ".", "..", "x/y", first["name"]):
            e = dict(first, name=name, path="/workspace/%s/%s" % (d, name))
            doc["entries"].append(e)
        return json.dumps(doc).encode()

    proxy, m = proxied_mount(service, container, edit)
    try:
        # (a directory the guest lists: the same rule filters its names)
        assert os.path.exists(m.path(d, "b"))
        assert sorted(os.listdir(m.path(d))) == sorted(["a", "b", "c"] + ["f%d" % i for i in range(1, 4101)])
    finally:
        rc = m.unmount()
        proxy.close()
    log = m.log()
    m.check_clean_log()
    assert rc == 0, log
    for line in ("'': it is empty", "'.': no directory entry", "'..': no directory entry",
                 "'x/y': it holds a '/'", "'a': it is listed twice"):
        assert log.count("listing of '/%s': not showing %s" % (d, line)) == 1, (line, log)


def test_a_get_of_the_wrong_size_is_an_error(service, container, need_fuse):
    d = unique("size")
    sh(service, container, "mkdir /workspace/%s && cd /workspace/%s && "
       "printf 0123456789 > short && printf 0123456789 > long && printf 0123456789 > right" % (d, d))

    def edit(method, target, status, body):
        if method != "GET" or urllib.parse.urlsplit(target).path != "/containers/files" or status != 200:
            return None
        p = query_path(target)
        if p.endswith("/short"):
            return body[:-1]
        if p.endswith("/long"):
            return body + b"!"
        return None

    # each file with a GET of its own (a bulk read would bring "long" in
    # its directory's archive)
    proxy, m = proxied_mount(service, container, edit, options=["bulk_read=0"])
    try:
        for name in ("short", "long"):
            with pytest.raises(OSError) as e:
                read_file(m.path(d, name))
            assert e.value.errno == errno.EIO, name
        assert read_file(m.path(d, "right")) == b"0123456789"
    finally:
        rc = m.unmount()
        proxy.close()
    log = m.log()
    m.check_clean_log()
    assert rc == 0, log
    assert "cannot read '/%s/short': 9 bytes came for a file of 10 bytes" % d in log, log
    assert "cannot read '/%s/long': 11 bytes came for a file of 10 bytes" % d in log, log


# ---- the log of a mount in the background ----

def syslog_listening():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect("/dev/log")
        return True
    except OSError:
        return False
    finally:
        s.close()


def daemon_mount(service, container, options):
    """mbfs without -f: the command returns once mounted; the daemon's pid
    comes from the control file."""
    mnt = tempfile.mkdtemp(prefix="mbfs-mnt-", dir=mbtest.tmp_base())
    spec = "%s@%s:/workspace" % (container["id"], container["createdAt"])
    args = [mbtest.MBFS, spec, mnt]
    for o in options:
        args += ["-o", o]
    r = subprocess.run(args, capture_output=True, env=service.env(), timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert os.path.ismount(mnt)
    pid = json.loads(read_file(os.path.join(mnt, CONTROL)))["pid"]
    return mnt, pid


def daemon_unmount(mnt, pid):
    mbtest.fusermount_u(mnt)
    deadline = time.time() + 60
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % pid)
    os.rmdir(mnt)


def provoke_warning(service, container, mnt):
    """A truncate refused because the sandbox swapped the file's directory
    (still shown by the mount) for a symlink: one warning line naming the
    file."""
    d = unique("swapped")
    name = d + "/" + unique("denied")
    sh(service, container, "mkdir -p /workspace/%s /root/%s && echo x > /workspace/%s && "
       "echo x > /root/%s" % (d, d, name, name))
    assert os.listdir(os.path.join(mnt, d))
    sh(service, container, "rm -rf /workspace/%s && ln -s /root/%s /workspace/%s" % (d, d, d))
    with pytest.raises(OSError) as e:
        os.truncate(os.path.join(mnt, name), 1)
    assert e.value.errno == errno.ELOOP
    sh(service, container, "rm -rf /workspace/%s /root/%s" % (d, d))
    return name


def test_daemon_logs_to_log_file(service, container, need_fuse, tmp_path):
    log = tmp_path / "mbfs.log"
    mnt, pid = daemon_mount(service, container, ["log_file=%s" % log])
    try:
        name = provoke_warning(service, container, mnt)
    finally:
        daemon_unmount(mnt, pid)
    text = log.read_text()
    assert os.stat(log).st_mode & 0o777 == 0o600
    lines = [l for l in text.splitlines() if name in l]
    assert lines and "mbfs[%d]: warning:" % pid in lines[0], text


def test_daemon_without_syslog_logs_in_the_cache_directory(service, container, need_fuse, tmp_path):
    if syslog_listening():
        pytest.skip("a syslog daemon listens on /dev/log here")
    cache = tmp_path / "cache"
    mnt, pid = daemon_mount(service, container, ["cache_dir=%s" % cache])
    try:
        name = provoke_warning(service, container, mnt)
    finally:
        daemon_unmount(mnt, pid)
    text = (cache / "mbfs.log").read_text()
    assert any(name in l for l in text.splitlines()), text
