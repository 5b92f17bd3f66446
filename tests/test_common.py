"""Tests of common/ through tests/mbapi, a thin CLI over the library.

Pure parts (codecs, parsers, control file, credentials, limiter) run without
a service; the rest drives the local service and checks what a user would:
bytes, errno and message text, and request counts where economy matters.
"""
import base64
import hashlib
import http.server
import json
import os
import random
import re
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

import mbtest

MBAPI = os.path.join(mbtest.BIN_DIR, "tests", "mbapi")


def run(args, env=None, input=None, timeout=120, check_sanitizer=True):
    e = dict(env if env is not None else os.environ)
    if mbtest.ASAN:
        e.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
    p = subprocess.run([MBAPI] + list(args), env=e, input=input, capture_output=True,
                       timeout=timeout)
    if check_sanitizer:
        text = p.stderr.decode(errors="replace")
        assert not mbtest.sanitizer_report(text), text
        assert p.returncode != 86, text
    return p


def ok(args, **kw):
    p = run(args, **kw)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p


def ok_json(args, **kw):
    return json.loads(ok(args, **kw).stdout)


def failure(args, **kw):
    """Run a command that must fail; return (message, info dict)."""
    p = run(args, **kw)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 1, (p.returncode, err, p.stdout[:200])
    m = re.search(r"^mbapi: (.*)$", err, re.M)
    i = re.search(r"^errno=(\S+) status=(\d+) code=(\S+) ambiguous=(\d)$", err, re.M)
    assert m and i, err
    return m.group(1), {"errno": i.group(1), "status": int(i.group(2)), "code": i.group(3),
                        "ambiguous": int(i.group(4)), "stderr": err, "stdout": p.stdout}


def bare_env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MAINBRELLA_")}
    e.update(extra)
    return e


# ---------------------------------------------------------------- pure parts

def test_sha256_vectors():
    assert ok(["sha256"], input=b"").stdout.strip() == \
        b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert ok(["sha256"], input=b"abc").stdout.strip() == \
        b"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    for n in (55, 56, 63, 64, 65, 119, 120, 1000, 1 << 20):
        data = random.randbytes(n)
        assert ok(["sha256"], input=data).stdout.strip().decode() == hashlib.sha256(data).hexdigest()


def test_base64_round_trip_and_rejects():
    for n in range(0, 10):
        data = random.randbytes(n)
        enc = ok(["base64"], input=data).stdout
        assert enc == base64.b64encode(data)
        assert ok(["unbase64"], input=enc).stdout == data
    data = bytes(range(256)) * 50
    assert ok(["unbase64"], input=base64.encodebytes(data)).stdout == data  # with newlines
    for bad in (b"a", b"ab$=", b"YQ==YQ==", b"Y==="):
        msg, info = failure(["unbase64"], input=bad)
        assert info["errno"] == "EINVAL"


@pytest.mark.parametrize("text,ms", [("1", 1000), ("1.5", 1500), ("30s", 30000), ("500ms", 500),
                                     ("2m", 120000), ("1h", 3600000), ("0.25", 250), ("0", 0)])
def test_duration_parsing(text, ms):
    assert ok(["duration", text]).stdout.strip() == str(ms).encode()


@pytest.mark.parametrize("text", ["", "s", "1x", "-1", "1.5.2", "ms", " 1", "1 s"])
def test_duration_rejects(text):
    msg, info = failure(["duration", text])
    assert info["errno"] == "EINVAL" and "invalid duration" in msg


def test_iso_parsing():
    out = ok(["iso", "2026-10-05T12:00:07.000Z"]).stdout.split()
    assert out == [b"1791201607", b"0", b"2026-10-05T12:00:07.000Z", b"1"]
    out = ok(["iso", "2026-10-05T12:00:07Z"]).stdout.split()
    assert out[0] == b"1791201607" and out[3] == b"0"      # valid, not canonical
    out = ok(["iso", "2024-02-29T23:59:59.5Z"]).stdout.split()
    assert out[1] == b"500"
    for bad in ("2026-13-01T00:00:00.000Z", "2026-10-05 12:00:00.000Z", "2026-10-05T12:00:00.000",
                "yesterday"):
        failure(["iso", bad])


def test_spec_parsing():
    d = ok_json(["spec-parse", "c1@2026-10-05T12:00:00.000Z:/workspace/sub"])
    assert d == {"id": "c1", "createdAt": "2026-10-05T12:00:00.000Z", "dir": "/workspace/sub"}
    assert ok_json(["spec-parse", "small"]) == {"id": "small", "createdAt": "", "dir": ""}
    assert ok_json(["spec-parse", "c499:/w"]) == {"id": "c499", "createdAt": "", "dir": "/w"}
    for bad in ("c0", "c500", "c01", "big", "@2026-10-05T12:00:00.000Z", "c1@2026-10-05T12:00:00Z",
                "c1@yesterday:/w"):
        msg, info = failure(["spec-parse", bad])
        assert info["errno"] == "EINVAL", bad


def test_shell_quoting():
    for s in ["plain", "it's", "'", "''", "a b\tc\nd", "$HOME `id` $(id) \\ \" ;&|<>*?[]",
              "\u00e9\u4e2d"]:
        q = ok(["shq", s]).stdout.decode().rstrip("\n")
        out = subprocess.run(["/bin/sh", "-c", "printf %s " + q], capture_output=True).stdout
        assert out.decode() == s


def test_errno_table():
    table = {("get", "file_not_found", 404): "ENOENT", ("mkdir", "file_exists", 409): "EEXIST",
             ("remove", "directory_not_empty", 409): "ENOTEMPTY",
             ("list", "not_directory", 409): "ENOTDIR",
             ("put", "file_access_denied", 403): "EACCES",
             ("list", "unsupported_file_name", 409): "EILSEQ",
             ("get", "not_regular_file", 409): "EISDIR", ("put", "file_too_large", 413): "EFBIG",
             ("list", "directory_too_large", 413): "E2BIG",
             ("chmod", "symlink_not_allowed", 409): "EPERM",
             ("get", "invalid_file_path", 400): "EINVAL",
             ("stat", "container_not_running", 409): "ENOTCONN",
             ("other", "not_authenticated", 401): "EACCES",
             ("job", "execution_limit", 429): "EAGAIN",
             ("job", "execution_history_limit", 429): "EUSERS",
             ("job", "execution_stream_limit", 429): "EMFILE",
             ("job", "execution_not_found", 404): "ENOENT",
             ("job", "idempotency_key_conflict", 409): "EEXIST",
             ("get", "some_new_code", 418): "EIO"}
    for (op, code, status), name in table.items():
        out = ok(["errno", op, code, str(status)]).stdout.decode().splitlines()
        assert out[0].split()[0] == name, (op, code, out)
        assert out[1].endswith("(HTTP %d %s)" % (status, code)), out
        text = out[1].split(" (HTTP")[0]
        assert text.startswith("cannot do it: ") and text[14].islower(), out
    # a lost answer to a mutation is ambiguous; to a read it is not
    assert ok(["errno", "put", "files_unavailable", "503"]).stdout.split()[:2] == [b"EAGAIN", b"1"]
    assert ok(["errno", "exec", "execution_unavailable", "503"]).stdout.split()[:2] == [b"EAGAIN", b"1"]
    assert ok(["errno", "get", "files_unavailable", "503"]).stdout.split()[:2] == [b"EAGAIN", b"0"]


def test_control_file_round_trip(tmp_path):
    text = ok(["control-format", "http://127.0.0.1:8787", "c7", "2026-10-05T12:00:00.000Z",
               "/workspace", str(tmp_path), "4242"]).stdout
    assert text.endswith(b"\n") and text.count(b"\n") == 1
    doc = json.loads(text)
    assert doc["apiUrl"] == "http://127.0.0.1:8787" and doc["pid"] == 4242
    assert "key" not in text.decode().lower()
    back = ok_json(["control-parse"], input=text)
    assert back["id"] == "c7" and back["createdAt"] == "2026-10-05T12:00:00.000Z"
    assert back["root"] == "/workspace" and back["mountpoint"] == str(tmp_path)
    assert back["version"] == doc["version"]
    # unknown fields are tolerated, wrong types are not
    doc["future"] = {"x": 1}
    assert ok_json(["control-parse"], input=json.dumps(doc).encode())["id"] == "c7"
    doc["pid"] = "4242"
    msg, info = failure(["control-parse"], input=json.dumps(doc).encode())
    assert info["errno"] == "EPROTO" and "'pid'" in msg and "number" in msg
    msg, info = failure(["control-parse"], input=b"{not json")
    assert info["errno"] == "EPROTO"

    # control-find walks up from a subdirectory
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".mainbrella").write_bytes(text)
    found = ok_json(["control-find", str(tmp_path / "a" / "b")])
    assert found["id"] == "c7" and found["rel"] == "a/b"
    assert ok_json(["control-find", str(tmp_path)])["rel"] == ""
    other = tempfile.mkdtemp(dir=mbtest.tmp_base())
    try:
        msg, info = failure(["control-find", other])
        assert info["errno"] == "ENOENT" and "not inside a Mainbrella mount" in msg
    finally:
        os.rmdir(other)


def test_key_file_permissions(tmp_path):
    secret = "mb_" + "ab" * 32
    kf = tmp_path / "api-key"
    kf.write_text(secret + "\n")
    os.chmod(kf, 0o644)
    env = bare_env(MAINBRELLA_API_KEY_FILE=str(kf))
    msg, info = failure(["key"], env=env)
    assert str(kf) in msg and "chmod 600" in msg
    assert secret not in info["stderr"]
    os.chmod(kf, 0o600)
    out = ok(["key"], env=env).stdout.decode()
    assert "key ok, 67 bytes" in out and secret not in out
    # the default location
    home = tmp_path / "home"
    (home / ".config" / "mainbrella").mkdir(parents=True)
    dk = home / ".config" / "mainbrella" / "api-key"
    dk.write_text(secret)
    os.chmod(dk, 0o640)
    msg, info = failure(["key"], env=bare_env(HOME=str(home)))
    assert str(dk) in msg and "chmod 600" in msg
    os.chmod(dk, 0o600)
    ok(["key"], env=bare_env(HOME=str(home)))
    msg, info = failure(["key"], env=bare_env(HOME=str(tmp_path / "nohome")))
    assert "MAINBRELLA_API_KEY" in msg


@pytest.mark.parametrize("url,good", [
    ("https://api.mainbrella.com", True), ("https://api.mainbrella.com/", True),
    ("http://127.0.0.1:8787", True), ("http://127.9.9.9", True), ("http://localhost:1", True),
    ("http://[::1]:8787", True), ("http://10.0.0.1", False), ("http://127.0.0.1.evil.com", False),
    ("http://localhost.evil.com", False), ("ftp://x", False), ("api.mainbrella.com", False)])
def test_url_rule(url, good):
    if good:
        assert ok(["url", url]).stdout.decode().strip() == url.rstrip("/")
    else:
        msg, info = failure(["url", url])
        assert info["errno"] == "EINVAL"


def test_limiter_slots(tmp_path):
    env = bare_env(XDG_RUNTIME_DIR=str(tmp_path), MAINBRELLA_API_URL="http://127.0.0.1:1")
    holders = [subprocess.Popen([MBAPI, "limiter-hold", "c3", "3000"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    try:
        for h in holders:
            assert h.stdout.readline() == b"held\n"
        t0 = time.monotonic()
        msg, info = failure(["limiter-try", "c3", "300"], env=env)
        assert info["errno"] == "ETIMEDOUT" and time.monotonic() - t0 >= 0.25
        # another container has its own slots
        ok(["limiter-try", "c4", "0"], env=env)
        assert (tmp_path / "mainbrella").stat().st_mode & 0o777 == 0o700
        # a killed holder frees its slot at once
        holders[0].kill()
        holders[0].wait()
        ok(["limiter-try", "c3", "2000"], env=env)
    finally:
        for h in holders:
            h.kill()
            h.wait()
            h.stdout.close()
            h.stderr.close()


def test_limiter_threads_of_one_process(tmp_path):
    # OFD locks: each acquire has its own open file description, so threads
    # of one process exclude each other like processes do
    env = bare_env(XDG_RUNTIME_DIR=str(tmp_path))
    assert ok(["limiter-threads", "c9", "12"], env=env).stdout.strip() == b"4"
    assert ok(["limiter-threads", "c9", "3"], env=env).stdout.strip() == b"3"


def test_connection_refused_is_fast_and_clear():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = bare_env(MAINBRELLA_API_URL="http://127.0.0.1:%d" % port,
                   MAINBRELLA_API_KEY="mb_" + "0" * 64)
    t0 = time.monotonic()
    msg, info = failure(["containers"], env=env)
    assert info["errno"] == "ECONNREFUSED" and "refused" in msg
    assert time.monotonic() - t0 < 10
    assert "0" * 64 not in info["stderr"]


# ------------------------------------------------- SSE against a scripted server

def _frame(lines, nl):
    return (nl.join(lines) + nl + nl).encode()


def _out(seq, text, multiline=False):
    d = json.dumps({"type": "stdout", "data": text, "sequence": seq})
    if multiline:  # the same JSON split over two data: lines
        head, tail = d.split(", ", 1)
        return ["id: %d" % seq, "event: stdout", "data: " + head + ",", "data: " + tail]
    return ["id: %d" % seq, "event: stdout", "data: " + d]


def _status(status):
    d = {"id": "0f6f1c9e-0000-4000-8000-000000000001", "createdAt": "2026-10-05T12:00:00.000Z",
         "startedAt": "2026-10-05T12:00:01.000Z", "status": status, "cursor": 6,
         "exitCode": 0 if status == "succeeded" else None, "timedOut": False,
         "outputTruncated": False, "newField": [1, 2]}
    return ["event: status", "data: " + json.dumps(d)]


class ScriptedSSE(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    cursors = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        m = re.search(r"[?&]cursor=(\d+)", self.path)
        cursor = int(m.group(1)) if m else -1
        ScriptedSSE.cursors.append(cursor)
        assert self.headers.get("Origin") is None
        assert self.headers.get("Authorization") == "Bearer mb_" + "1" * 64
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        w = self.wfile
        if cursor == 0:
            # CRLF line ends, a multi-line data field, comments, byte-wise writes
            data = (b": hello\r\n\r\n" + _frame(_out(1, "one\n"), "\r\n") +
                    _frame(_out(2, "two\n", multiline=True), "\r\n") +
                    b":heartbeat\r\n\r\n" + _frame(_out(3, "th\u00e9\n"), "\r"))
            for i in range(len(data)):
                w.write(data[i:i + 1])
                w.flush()
            w.write(_frame(_status("running"), "\n"))   # the 30 s rotation
        elif cursor == 3:
            # replays 2..5 (duplicates must be dropped), then drops mid-frame
            for s in (2, 3, 4, 5):
                w.write(_frame(_out(s, ["", "two\n", "th\u00e9\n", "four\n", "five\n"][s - 1]), "\n"))
            w.write(b"id: 6\nevent: stdout\ndata: {\"type\":\"std")
        elif cursor == 5:
            w.write(_frame(_out(6, "six\n"), "\n") + b": heartbeat\n\n")
            w.write(_frame(_status("succeeded"), "\n"))
        w.flush()


@pytest.fixture
def scripted_sse():
    ScriptedSSE.cursors = []
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ScriptedSSE)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_sse_follow_parsing_rotation_and_dedupe(scripted_sse):
    env = bare_env(MAINBRELLA_API_URL=scripted_sse, MAINBRELLA_API_KEY="mb_" + "1" * 64)
    eid = "0f6f1c9e-0000-4000-8000-000000000001"
    p = ok(["follow", "c1", "2026-10-05T12:00:00.000Z", eid], env=env)
    assert p.stdout.decode() == "one\ntwo\nth\u00e9\nfour\nfive\nsix\n"
    assert "status=succeeded cursor=6" in p.stderr.decode()
    assert ScriptedSSE.cursors == [0, 3, 5]
    p = ok(["follow", "c1", "2026-10-05T12:00:00.000Z", eid, "--json"], env=env)
    events = [json.loads(l) for l in p.stdout.splitlines()]
    seqs = [e["seq"] for e in events if e["kind"] == 1]
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert sum(1 for e in events if e["kind"] == 3) >= 3     # comments and the reconnect
    statuses = [e["job"]["status"] for e in events if e["kind"] == 4]
    assert statuses == ["running", "succeeded"]


class ScriptedJSON(http.server.BaseHTTPRequestHandler):
    """Answers stat/list with the entry named by the path's last segment."""
    protocol_version = "HTTP/1.0"
    entries = {
        "good": {"name": "good", "path": "/w/good", "type": "file", "size": 3, "mode": "4755",
                 "uid": 1000, "gid": 1000, "modifiedAt": "2026-10-05T12:00:07.000Z",
                 "someday": {"new": True}},
        "newtype": {"name": "newtype", "type": "door", "size": 0, "mode": "0644", "uid": 0,
                    "gid": 0, "modifiedAt": "2026-10-05T12:00:07.000Z"},
        "strsize": {"name": "strsize", "type": "file", "size": "3", "mode": "0644"},
        "intmode": {"name": "intmode", "type": "file", "size": 3, "mode": 420},
        "hexmode": {"name": "hexmode", "type": "file", "size": 3, "mode": "0x1ff"},
        "badtime": {"name": "badtime", "type": "file", "size": 3, "mode": "0644",
                    "modifiedAt": "last tuesday"},
        "noname": {"type": "file", "size": 3, "mode": "0644"},
    }

    def log_message(self, *a):
        pass

    def do_GET(self):
        q = dict(urllib.parse.parse_qsl(self.path.partition("?")[2]))
        name = q.get("path", "").rsplit("/", 1)[-1]
        if self.path.startswith("/containers/files/stat"):
            body = self.entries[name] if name in self.entries else None
        elif name == "notjson":
            body = "<html>"
        elif name == "noentries":
            body = {"path": "/w", "nextOffset": None}
        else:
            body = {"path": "/w", "entries": [self.entries["good"], self.entries[name]],
                    "nextOffset": None}
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def scripted_json():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ScriptedJSON)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield bare_env(MAINBRELLA_API_URL="http://127.0.0.1:%d" % srv.server_address[1],
                   MAINBRELLA_API_KEY="mb_" + "2" * 64)
    srv.shutdown()
    srv.server_close()


def test_answers_checked_field_by_field(scripted_json):
    gen = ["c1", "2026-10-05T12:00:00.000Z"]
    st = ok_json(["stat", *gen, "/w/good"], env=scripted_json)
    assert st["mode"] == "4755" and st["mtime"] == 1791201607 and st["size"] == 3
    assert ok_json(["stat", *gen, "/w/newtype"], env=scripted_json)["type"] == "other"
    for name, field in [("strsize", "'size'"), ("intmode", "'mode'"), ("hexmode", "'mode'"),
                        ("badtime", "'modifiedAt'"), ("noname", "'name'")]:
        msg, info = failure(["stat", *gen, "/w/" + name], env=scripted_json)
        assert info["errno"] == "EPROTO" and field in msg, (name, msg)
        assert msg.startswith("cannot stat '/w/%s': " % name)
        msg, info = failure(["ls", *gen, "/w/" + name], env=scripted_json)
        assert info["errno"] == "EPROTO" and field in msg, (name, msg)
    msg, info = failure(["ls", *gen, "/w/notjson"], env=scripted_json)
    assert info["errno"] == "EPROTO" and "not valid JSON" in msg
    msg, info = failure(["ls", *gen, "/w/noentries"], env=scripted_json)
    assert info["errno"] == "EPROTO" and "'entries' missing" in msg


# ------------------------------------------------------------- against the service

@pytest.fixture
def api(service, container):
    service.clear_faults()
    env = service.env()

    class Api:  # noqa: too few methods
        ident = container
        env = dict(service.env(), **({"ASAN_OPTIONS": "detect_leaks=1:exitcode=86"}
                                     if mbtest.ASAN else {}))
        gen = [container["id"], container["createdAt"]]

        def run(self, *args, **kw):
            kw.setdefault("env", env)
            return run(list(args), **kw)

        def ok(self, *args, **kw):
            kw.setdefault("env", env)
            return ok(list(args), **kw)

        def fail(self, *args, **kw):
            kw.setdefault("env", env)
            return failure(list(args), **kw)

        def sh(self, command):
            doc = service.exec(container, command)
            assert doc["exitCode"] == 0, doc
            return doc["stdout"]

    yield Api()
    service.clear_faults()


def test_containers_list(api):
    doc = json.loads(api.ok("containers").stdout)
    assert any(c["id"] == api.ident["id"] and c["createdAt"] == api.ident["createdAt"] for c in doc)


def test_errors_404_409_403(api):
    msg, info = api.fail("stat", *api.gen, "/workspace/no-such")
    assert msg == "cannot stat '/workspace/no-such': no such file or directory (HTTP 404 file_not_found)"
    assert info["errno"] == "ENOENT" and info["status"] == 404
    msg, info = api.fail("get", *api.gen, "/workspace/no-such")
    assert info["errno"] == "ENOENT" and msg.startswith("cannot read '/workspace/no-such'")
    api.ok("mkdir", *api.gen, "/workspace/d1")
    msg, info = api.fail("mkdir", *api.gen, "/workspace/d1")
    assert info["errno"] == "EEXIST" and "(HTTP 409 file_exists)" in msg
    api.ok("put", *api.gen, "/workspace/f1", input=b"x")
    msg, info = api.fail("ls", *api.gen, "/workspace/f1")
    assert info["errno"] == "ENOTDIR" and "(HTTP 409 not_directory)" in msg
    msg, info = api.fail("get", *api.gen, "/workspace/d1")
    assert info["errno"] == "EISDIR" and "not_regular_file" in msg
    api.ok("put", *api.gen, "/workspace/d1/inner", input=b"x")
    msg, info = api.fail("rm", *api.gen, "/workspace/d1")
    assert info["errno"] == "ENOTEMPTY"
    # mkdir -p through a file: 403 file_access_denied (contract §8-11)
    msg, info = api.fail("mkdir", *api.gen, "/workspace/f1/sub/deeper", "-p")
    assert info["errno"] == "EACCES" and info["status"] == 403 and "file_access_denied" in msg
    msg, info = api.fail("get", *api.gen, "relative")
    assert info["errno"] == "EINVAL" and info["status"] == 400


def test_bad_key_is_rejected_without_leaking(api, service):
    bad = "mb_" + "7" * 64
    env = service.env(MAINBRELLA_API_KEY=bad)
    msg, info = failure(["stat", *api.gen, "/workspace"], env=env)
    assert info["errno"] == "EACCES" and info["status"] == 401 and "not_authenticated" in msg
    assert bad not in info["stderr"] and "7" * 64 not in info["stderr"]
    assert service.key not in info["stderr"]


def test_timeout_bounds_a_call(api, service):
    service.fault(route="GET /containers/files/stat", count=1, heldMs=60000)
    t0 = time.monotonic()
    msg, info = api.fail("--timeout", "1000", "stat", *api.gen, "/workspace")
    service.release_held()
    assert info["errno"] == "ETIMEDOUT" and "timed out" in msg
    assert time.monotonic() - t0 < 30       # its own bound, not the held answer's


def test_stopped_generation(api):
    msg, info = api.fail("stat", api.ident["id"], "2020-01-01T00:00:00.000Z", "/workspace")
    assert info["errno"] == "ENOTCONN" and info["code"] == "container_not_running"


def test_binary_round_trip_and_size_limit(api):
    data = bytes(range(256)) * 16 + b"\0\r\n\xff" * 100
    api.ok("put", *api.gen, "/workspace/bin", input=data)
    assert api.ok("get", *api.gen, "/workspace/bin").stdout == data
    big = random.randbytes(1 << 20)
    api.ok("put", *api.gen, "/workspace/big", input=big)
    assert api.ok("get", *api.gen, "/workspace/big").stdout == big
    st = json.loads(api.ok("stat", *api.gen, "/workspace/big").stdout)
    assert st["size"] == 1 << 20 and st["type"] == "file" and st["mode"] == "0600"
    api.ok("put", *api.gen, "/workspace/empty", input=b"")
    assert api.ok("get", *api.gen, "/workspace/empty").stdout == b""
    msg, info = api.fail("put", *api.gen, "/workspace/toobig", input=big + b"x")
    assert info["errno"] == "EFBIG"
    api.sh("head -c 1048577 /dev/zero > /workspace/toobig2")
    msg, info = api.fail("get", *api.gen, "/workspace/toobig2")
    assert info["errno"] == "EFBIG" and "file_too_large" in msg


def test_metadata_ops(api):
    api.ok("mkdir", *api.gen, "/workspace/m/a/b", "-p", "0750")
    st = json.loads(api.ok("stat", *api.gen, "/workspace/m/a/b").stdout)
    assert st["type"] == "directory" and st["mode"] == "0750"
    api.ok("put", *api.gen, "/workspace/m/f", input=b"hello")
    api.ok("chmod", *api.gen, "/workspace/m/f", "0640")
    assert json.loads(api.ok("stat", *api.gen, "/workspace/m/f").stdout)["mode"] == "0640"
    api.ok("mv", *api.gen, "/workspace/m/f", "/workspace/m/g")
    msg, info = api.fail("stat", *api.gen, "/workspace/m/f")
    assert info["errno"] == "ENOENT"
    api.ok("put", *api.gen, "/workspace/m/h", input=b"")
    msg, info = api.fail("mv", *api.gen, "/workspace/m/g", "/workspace/m/h")
    assert info["errno"] == "EEXIST"
    api.sh("ln -s g /workspace/m/link && chmod 1777 /workspace/m/a")
    st = json.loads(api.ok("stat", *api.gen, "/workspace/m/link").stdout)
    assert st["type"] == "symlink" and st["linkTarget"] == "g"
    st = json.loads(api.ok("stat", *api.gen, "/workspace/m/link", "follow").stdout)
    assert st["type"] == "file" and st["size"] == 5
    assert json.loads(api.ok("stat", *api.gen, "/workspace/m/a").stdout)["mode"] == "1777"
    msg, info = api.fail("chmod", *api.gen, "/workspace/m/link", "0644")
    assert info["errno"] == "EPERM" and "symlink_not_allowed" in msg
    api.ok("rm", *api.gen, "/workspace/m", "-r")
    assert api.fail("stat", *api.gen, "/workspace/m")[1]["errno"] == "ENOENT"


def test_list_paging_one_request_per_1000(api, service):
    api.sh("mkdir -p /workspace/many && cd /workspace/many && "
           "seq -f 'f%05g' 1 2500 | xargs touch")
    service.reset_stats()
    doc = json.loads(api.ok("ls", *api.gen, "/workspace/many").stdout)
    assert doc["count"] == 2500
    names = [e["name"] for e in doc["entries"]]
    assert names == ["f%05d" % i for i in range(1, 2501)]
    assert mbtest.requests_for(service.stats(), "GET /containers/files/list") == 3
    page = json.loads(api.ok("ls", *api.gen, "/workspace/many", "10", "2490").stdout)
    assert page["count"] == 10 and page["next"] == -1
    page = json.loads(api.ok("ls", *api.gen, "/workspace/many", "10", "20").stdout)
    assert page["next"] == 30 and page["entries"][0]["name"] == "f00021"


def test_query_encoding_of_odd_names(api):
    names = ["a+b", "a b", "a&b=c", "a#b", "a%20b", "a?b", "plus+and space&amp;#%?x",
             "\u00e9t\u00e9", "x%2Fy"]
    api.ok("mkdir", *api.gen, "/workspace/odd")
    for i, n in enumerate(names):
        api.ok("put", *api.gen, "/workspace/odd/" + n, input=n.encode())
    for n in names:
        assert api.ok("get", *api.gen, "/workspace/odd/" + n).stdout == n.encode()
        assert json.loads(api.ok("stat", *api.gen, "/workspace/odd/" + n).stdout)["name"] == n
    listed = json.loads(api.ok("ls", *api.gen, "/workspace/odd").stdout)
    assert sorted(e["name"] for e in listed["entries"]) == sorted(names)
    # the guest agrees: no name was mangled into another
    out = api.sh("ls -1 /workspace/odd")
    assert sorted(out.splitlines()) == sorted(names)


def test_exec(api):
    doc = json.loads(api.ok("exec", *api.gen, "echo out; echo err >&2; exit 3").stdout)
    assert base64.b64decode(doc.pop("stdoutBase64")) == b"out\n"
    assert doc == {"stdout": "out\n", "stderr": "err\n", "exitCode": 3, "timedOut": False,
                   "outputTruncated": False}
    doc = json.loads(api.ok("exec", *api.gen, "sleep 5", "300").stdout)
    assert doc["timedOut"] is True and doc["exitCode"] is None
    msg, info = api.fail("exec", *api.gen, "   ")
    assert info["errno"] == "EINVAL"


def test_output_keeps_nul_bytes(api):
    cmd = "printf 'a\\000b\\000\\000c\\\\u0000d\\377'"
    want = b"a\0b\0\0c\\u0000d\xef\xbf\xbd"   # invalid UTF-8 becomes U+FFFD
    doc = json.loads(api.ok("exec", *api.gen, cmd).stdout)
    assert base64.b64decode(doc["stdoutBase64"]) == want
    job = json.loads(api.ok("job", *api.gen, cmd).stdout)
    assert api.ok("follow", *api.gen, job["id"]).stdout == want
    doc = json.loads(api.ok("job-get", *api.gen, job["id"]).stdout)
    assert base64.b64decode(doc["stdoutBase64"]) == want


def test_concurrency_never_surfaces_429(api, service, tmp_path):
    """8 processes x 3 slow execs: the machine-wide limiter keeps the pool at <= 4."""
    service.reset_stats()
    env = service.env(XDG_RUNTIME_DIR=str(tmp_path))
    if mbtest.ASAN:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
    script = "for i in 1 2 3; do %s exec %s %s 'sleep 0.3; echo ok' || exit 1; done" % (
        MBAPI, api.ident["id"], api.ident["createdAt"])
    procs = [subprocess.Popen(["/bin/sh", "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        assert out.count(b'"stdout":"ok\\n"') == 3
        assert not mbtest.sanitizer_report(err.decode())
    st = service.stats()
    assert mbtest.requests_for(st, "POST /containers/exec") == 24
    assert "429" not in st["statuses"].get("POST /containers/exec", {})
    assert 1 <= st["peakConcurrentOps"][api.ident["id"]] <= 4


def test_execution_limit_429_is_retried(api, service, tmp_path):
    """Without the limiter the server refuses the 5th op; the client backs off."""
    service.reset_stats()
    env = service.env(XDG_RUNTIME_DIR=str(tmp_path))
    if mbtest.ASAN:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
    cmd = [MBAPI, "--no-limiter", "exec", api.ident["id"], api.ident["createdAt"], "sleep 1"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    st = service.stats()
    assert st["statuses"]["POST /containers/exec"].get("429", 0) >= 1
    assert st["statuses"]["POST /containers/exec"].get("200", 0) == 8
    # an injected 429 on a mutation is retried too: nothing was started
    service.reset_stats()
    service.fault(route="PUT /containers/files", count=2, status=429, error="execution_limit")
    api.ok("put", *api.gen, "/workspace/after429", input=b"ok")
    assert mbtest.requests_for(service.stats(), "PUT /containers/files") == 3


def test_reads_retried_on_503_and_reset(api, service):
    api.ok("put", *api.gen, "/workspace/r", input=b"content")
    service.reset_stats()
    service.fault(route="GET /containers/files", count=2, status=503, error="files_unavailable")
    assert api.ok("get", *api.gen, "/workspace/r").stdout == b"content"
    assert mbtest.requests_for(service.stats(), "GET /containers/files") == 3
    service.reset_stats()
    service.fault(route="GET /containers/files/list", count=2, reset=True, afterBytes=5)
    assert json.loads(api.ok("ls", *api.gen, "/workspace").stdout)["count"] >= 1
    assert mbtest.requests_for(service.stats(), "GET /containers/files/list") == 3
    service.reset_stats()
    service.fault(route="GET /containers/files/stat", count=1, status=503, error="files_unavailable",
                  when="after")
    assert json.loads(api.ok("stat", *api.gen, "/workspace/r").stdout)["size"] == 7
    assert mbtest.requests_for(service.stats(), "GET /containers/files/stat") == 2


def test_mutations_not_retried_when_ambiguous(api, service):
    service.reset_stats()
    service.fault(route="PUT /containers/files", count=1, status=503, error="files_unavailable",
                  when="after")
    msg, info = api.fail("put", *api.gen, "/workspace/amb", input=b"new")
    assert info["ambiguous"] == 1 and info["errno"] == "EAGAIN" and "files_unavailable" in msg
    assert mbtest.requests_for(service.stats(), "PUT /containers/files") == 1
    # it did happen: the caller must reconcile, never resend blindly
    assert api.ok("get", *api.gen, "/workspace/amb").stdout == b"new"

    service.reset_stats()
    service.fault(route="POST /containers/exec", count=1, status=503, error="execution_unavailable",
                  when="after")
    msg, info = api.fail("exec", *api.gen, "echo x >> /workspace/once")
    assert info["ambiguous"] == 1
    assert mbtest.requests_for(service.stats(), "POST /containers/exec") == 1
    assert api.sh("cat /workspace/once") == "x\n"

    service.reset_stats()
    service.fault(route="POST /containers/files/mkdir", count=1, reset=True, afterBytes=0)
    msg, info = api.fail("mkdir", *api.gen, "/workspace/ambdir")
    assert info["ambiguous"] == 1 and info["status"] == 0
    assert mbtest.requests_for(service.stats(), "POST /containers/files/mkdir") == 1

    # a "before" 503 on a read-only route is not ambiguous and is retried
    service.reset_stats()
    service.fault(route="GET /containers/files/stat", count=1, status=503, error="files_unavailable")
    api.ok("stat", *api.gen, "/workspace/ambdir")


def test_job_create_retried_with_same_key(api, service):
    service.reset_stats()
    service.fault(route="POST /containers/executions", count=1, status=503,
                  error="execution_unavailable", when="after")
    job = json.loads(api.ok("job", *api.gen, "echo hi").stdout)
    st = service.stats()
    assert mbtest.requests_for(st, "POST /containers/executions") == 2
    assert st["jobsCreated"][api.ident["id"]] == 1
    p = api.ok("follow", *api.gen, job["id"])
    assert p.stdout == b"hi\n"
    # same key, other command: conflict
    key = "k" + os.urandom(6).hex()
    api.ok("job", *api.gen, "true", key)
    msg, info = api.fail("job", *api.gen, "false", key)
    assert info["errno"] == "EEXIST" and "idempotency_key_conflict" in msg


def test_follow_survives_resets_exactly_once(api, service):
    job = json.loads(api.ok("job", *api.gen,
                            "i=1; while [ $i -le 400 ]; do echo line$i; i=$((i+1)); "
                            "[ $((i % 50)) -eq 0 ] && sleep 0.2; done; echo err >&2").stdout)
    service.reset_stats()
    service.fault(route="GET /containers/executions/{eid}/events", count=3, reset=True,
                  afterBytes=700)
    p = api.ok("follow", *api.gen, job["id"], "--json")
    events = [json.loads(l) for l in p.stdout.splitlines()]
    out = "".join(e["data"] for e in events if e["kind"] == 1)
    assert out == "".join("line%d\n" % i for i in range(1, 401))
    seqs = [e["seq"] for e in events if e["kind"] in (1, 2)]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    assert [e["data"] for e in events if e["kind"] == 2] == ["err\n"]
    assert events[-1]["kind"] == 4 and events[-1]["job"]["status"] == "succeeded"
    assert mbtest.requests_for(service.stats(), "GET /containers/executions/{eid}/events") >= 4
    # resuming from a cursor replays only what follows it
    p = api.ok("follow", *api.gen, job["id"], str(seqs[-2]))
    assert p.stdout == b"" or p.stdout.decode().count("line") <= 1


def test_job_stdin_and_get(api):
    job = json.loads(api.ok("job", *api.gen, "cat; echo done", "k" + os.urandom(6).hex(),
                            "stdin").stdout)
    for _ in range(100):
        j = json.loads(api.ok("job-get", *api.gen, job["id"]).stdout)
        if j["status"] == "running":
            break
        time.sleep(0.05)
    api.ok("stdin", *api.gen, job["id"], input=b"abc\n")
    api.ok("stdin-close", *api.gen, job["id"])
    api.ok("stdin-close", *api.gen, job["id"])      # repeat counts as done
    p = api.ok("follow", *api.gen, job["id"])
    assert p.stdout == b"abc\ndone\n"
    j = json.loads(api.ok("job-get", *api.gen, job["id"]).stdout)
    assert j["status"] == "succeeded" and j["exitCode"] == 0 and j["stdout"] == "abc\ndone\n"
    assert j["stdinBytes"] == 4
    assert any(x["id"] == job["id"] for x in json.loads(api.ok("job-list", *api.gen).stdout))
    msg, info = api.fail("job-get", *api.gen, "0f6f1c9e-0000-4000-8000-00000000dead")
    assert info["errno"] == "ENOENT"


def test_export(api, tmp_path):
    api.ok("put", *api.gen, "/workspace/exported.txt", input=b"in the archive")
    out = tmp_path / "w.tgz"
    with open(out, "wb") as f:
        p = subprocess.run([MBAPI, "export", *api.gen], stdout=f, stderr=subprocess.PIPE,
                           env=api.env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    listing = subprocess.run(["tar", "-tzf", str(out)], capture_output=True, text=True)
    assert listing.returncode == 0 and "./exported.txt" in listing.stdout.split()


def test_delete_container(service):
    c = service.create_container()
    env = service.env()
    ok(["delete", c["id"], c["createdAt"]], env=env)
    msg, info = failure(["delete", c["id"], c["createdAt"]], env=env)
    assert info["errno"] == "ENOTCONN" and info["code"] == "container_not_running"


@pytest.mark.slow
def test_follow_across_the_30s_rotation(api, service):
    job = json.loads(api.ok("job", *api.gen, "echo before; sleep 33; echo after",
                                   "-", "-", "60000").stdout)
    service.reset_stats()
    p = api.ok("follow", *api.gen, job["id"], "--json", timeout=120)
    events = [json.loads(l) for l in p.stdout.splitlines()]
    assert "".join(e["data"] for e in events if e["kind"] == 1) == "before\nafter\n"
    statuses = [e["job"]["status"] for e in events if e["kind"] == 4]
    assert statuses[0] == "running" and statuses[-1] == "succeeded"
    assert mbtest.requests_for(service.stats(), "GET /containers/executions/{eid}/events") == 2
