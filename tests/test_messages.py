"""Messages a user reads, through the real binaries: each says what is
wrong, once, with its subject quoted (issue 20, "Messages that mislead").
mbfs: an unreachable URL, a saved creation key, a failed boot, a bad
CONTAINER:DIR, 503 answers, --help. mbexec: a bare shell on a terminal and
the --json fields."""
import json
import os
import pty
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

import mbtest
from test_mbexec_helpers import mbx, module_mount
from test_mbfs_helpers import sh, unique

UNREACHABLE = "https://nonexistent.invalid"

pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def mntdir():
    path = tempfile.mkdtemp(prefix="mbfs-msg-", dir=mbtest.tmp_base())
    yield path
    if os.path.ismount(path):
        mbtest.fusermount_u(path)
    os.rmdir(path)


def mbfs(service, args, env=None, timeout=90):
    return subprocess.run([mbtest.MBFS] + list(args), capture_output=True, timeout=timeout,
                          env=service.env(**(env or {})), stdin=subprocess.DEVNULL)


def err_lines(r):
    text = r.stderr.decode()
    assert not mbtest.sanitizer_report(text), text
    return [l for l in text.splitlines() if l.strip()]


def no_doubled_prefix(text):
    for prefix in ("cannot create a container: ", "invalid container", "cannot read '"):
        assert text.count(prefix) <= 1, text


def saved_keys(state):
    d = os.path.join(state, "mbfs")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


# --- mbfs --create ---

def test_create_against_an_unreachable_url_names_the_dns_failure(service, mntdir, tmp_path):
    state = str(tmp_path / "state")
    r = mbfs(service, ["-f", "-v", "--create", "-o", "api_url=" + UNREACHABLE, mntdir],
             env={"XDG_STATE_HOME": state}, timeout=120)
    lines = err_lines(r)
    assert r.returncode != 0
    assert lines[-1] == ("mbfs: cannot create a container: cannot reach '%s': "
                         "Could not resolve host" % UNREACHABLE), lines
    # quickly: one request and its 6 retries (-v logs each), not two
    # minutes of asking again for a creation that never left
    attempts = [l for l in lines if l.startswith("mbfs: info: POST /containers failed")]
    assert 1 <= len(attempts) <= 7, lines
    # each names its cause, not "No route to host"
    for l in attempts:
        assert re.fullmatch(r"mbfs: info: POST /containers failed \(cannot reach '%s': Could not "
                            r"resolve host\) \d+ ms" % re.escape(UNREACHABLE), l), l
    no_doubled_prefix(r.stderr.decode())
    # no attempt got through: nothing was started, no key is kept
    assert saved_keys(state) == []


class TlsServer(threading.Thread):
    """An https server on loopback whose certificate is self-signed, as a
    proxy's or a wrong host's is to mbfs: counts the connections made to it
    and any request bytes that reach it after a handshake."""

    def __init__(self, tmp_path):
        super().__init__(daemon=True)
        cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=not-mainbrella"],
                       check=True, capture_output=True, timeout=60)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "https://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.connections, self.requests = 0, b""
        self.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return   # closed
            self.connections += 1
            try:
                with self.ctx.wrap_socket(conn, server_side=True) as t:
                    self.requests += t.recv(4096)
            except (OSError, ssl.SSLError):
                conn.close()

    def close(self):
        self.sock.close()


def test_create_against_a_certificate_not_accepted_fails_at_once(service, mntdir, tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("needs openssl to make a certificate")
    srv = TlsServer(tmp_path)
    state = str(tmp_path / "state")
    try:
        r = mbfs(service, ["-f", "--create", "-o", "api_url=" + srv.url, mntdir],
                 env={"XDG_STATE_HOME": state})
    finally:
        srv.close()
    lines = err_lines(r)
    assert r.returncode != 0
    prefix = ("mbfs: cannot create a container: cannot reach '%s': its TLS certificate is "
              "not accepted (" % srv.url)
    assert lines[-1].startswith(prefix) and "certificate" in lines[-1][len(prefix):], lines
    assert "may or may not" not in r.stderr.decode(), lines
    no_doubled_prefix(r.stderr.decode())
    # no request got past a handshake: nothing was started, no key is kept,
    # and one retry is all it takes to say so (not two minutes of them)
    assert srv.requests == b"", srv.requests
    assert 1 <= srv.connections <= 2, srv.connections
    assert saved_keys(state) == []


def test_a_resumed_creation_key_says_how_to_start_afresh(service, mntdir, tmp_path):
    state = tmp_path / "state"
    (state / "mbfs").mkdir(parents=True)
    key = "0123456789abcdef0123456789abcdef"
    saved = state / "mbfs" / ("create-%s.json" % key)
    saved.write_text(json.dumps({"idempotencyKey": key, "apiUrl": UNREACHABLE, "body": {}}) + "\n")
    r = mbfs(service, ["-f", "--create", "-o", "api_url=" + UNREACHABLE, mntdir],
             env={"XDG_STATE_HOME": str(state)}, timeout=120)
    text = r.stderr.decode()
    assert r.returncode != 0
    assert "resuming the unresolved container creation saved in '%s'" % saved in text, text
    assert "to start afresh instead, delete that file" in text, text
    last = err_lines(r)[-1]
    assert "cannot reach '%s': Could not resolve host" % UNREACHABLE in last, last
    assert "its key is saved in '%s'" % saved in last and "delete the file" in last, last
    # the first attempt may have started a container: the key stays
    assert saved.exists()


def test_a_failed_boot_reads_as_one(service, mntdir, tmp_path):
    # what the service answers when a boot fails: 503, then for the same key 409
    service.fault(route="POST /containers", count=1, status=503, error="containers_unavailable")
    service.fault(route="POST /containers", count=1, status=409, error="creation_no_longer_running")
    state = str(tmp_path / "state")
    r = mbfs(service, ["-f", "--create", mntdir], env={"XDG_STATE_HOME": state})
    lines = err_lines(r)
    assert r.returncode != 0
    assert lines[-1].startswith("mbfs: cannot create a container: the sandbox stopped while "
                                "starting: its image failed to boot"), lines
    no_doubled_prefix(r.stderr.decode())
    assert saved_keys(state) == []   # a definite answer
    assert not os.path.ismount(mntdir)


def test_a_refused_size_or_image_names_the_choices(service, mntdir, tmp_path):
    state = str(tmp_path / "state")
    r = mbfs(service, ["-f", "--create", "--size", "huge", mntdir], env={"XDG_STATE_HOME": state})
    assert r.returncode != 0
    assert err_lines(r) == ["mbfs: cannot create a container: invalid container size (HTTP 400 "
                            "invalid_size): --size 'huge'; the sizes are lite, small, medium, "
                            "large and xl"]
    r = mbfs(service, ["-f", "--create", "--catalog", "cobol", mntdir],
             env={"XDG_STATE_HOME": state})
    assert r.returncode != 0
    assert err_lines(r) == ["mbfs: cannot create a container: no such image (HTTP 404 "
                            "image_not_found): --catalog 'cobol'; the images are node, python, "
                            "rust, go and devops"]
    assert saved_keys(state) == [] and not os.path.ismount(mntdir)


# --- CONTAINER[@GEN][:DIR] ---

def test_a_relative_remote_dir_is_blamed_not_the_container(service, mntdir):
    r = mbfs(service, ["-f", "small:workspace", mntdir])
    assert r.returncode != 0
    assert err_lines(r) == ["mbfs: invalid remote directory 'workspace' in 'small:workspace': "
                            "it must be absolute, as in 'small:/workspace'"]
    gen = "2026-01-01T00:00:00.000Z"
    r = mbfs(service, ["-f", "c3@%s:workspace" % gen, mntdir])
    assert err_lines(r) == ["mbfs: invalid remote directory 'workspace' in 'c3@%s:workspace': "
                            "it must be absolute, as in 'c3@%s:/workspace'" % (gen, gen)]


def test_an_unknown_container_is_named_once(service, mntdir):
    r = mbfs(service, ["-f", "box:/workspace", mntdir])
    assert r.returncode != 0
    assert err_lines(r) == ["mbfs: unknown container 'box' in 'box:/workspace': a container id "
                            "is 'small' or c1..c499"]


# --- 503 answers ---

def test_503_answers_are_logged_as_unavailable(service, container, need_fuse):
    name = unique("busy")
    sh(service, container, "echo hello > /workspace/%s" % name)
    m = mbtest.Mount(service, container, options=["op_timeout=3"])
    try:
        service.fault(route="GET /containers/files", count=100, status=503, error="files_unavailable")
        with pytest.raises(OSError):
            with open(m.path(name), "rb") as f:
                f.read()
        service.clear_faults()
    finally:
        m.unmount()
    log = m.log()
    assert "the file service is unavailable (HTTP 503 files_unavailable)" in log, log
    assert "timed out" not in log, log
    for line in log.splitlines():
        assert line.count("cannot read '") <= 1, line


# --- mbfs --help ---

def test_help_fstab_line_and_no_libfuse_defaults(service):
    r = mbfs(service, ["--help"])
    assert r.returncode == 0
    out = r.stdout.decode()
    fstab = [l for l in out.splitlines() if "fuse.mbfs" in l]
    assert len(fstab) == 1, out
    assert "@" not in fstab[0].split()[0] and "key_file=/home/USER/.config/mainbrella/api-key" in fstab[0]
    # mbfs's defaults, not libfuse's 1 s / 0 s
    assert "(1.0s)" not in out and "(0.0s)" not in out, out
    assert "default 20s" in out and "allow_other" in out


# --- mbexec ---

@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def run_on_tty(service, args, cwd):
    """mbexec with a terminal as stdin (stdout, stderr: pipes)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.run([mbtest.MBEXEC] + list(args), cwd=cwd, stdin=slave, capture_output=True,
                           timeout=120, env=service.env())
    finally:
        os.close(slave)
        os.close(master)
    assert not mbtest.sanitizer_report(p.stderr.decode(errors="replace")), p.stderr
    return p


def test_a_bare_shell_on_a_terminal_gets_a_hint(service, mnt):
    p = run_on_tty(service, ["bash"], mnt.mountpoint)
    assert p.returncode == 0
    assert p.stderr.decode() == ("mbexec: note: 'bash' reads a terminal, whose input mbexec forwards "
                                 "only with -t: use 'mbexec -t bash'\n")
    # asked for explicitly, or not a bare shell: no hint
    for args in (["-T", "bash"], ["-n", "bash"], ["bash", "-c", "true"], ["true"]):
        p = run_on_tty(service, args, mnt.mountpoint)
        assert p.returncode == 0 and b"note:" not in p.stderr, (args, p.stderr)
    p = mbx(service, ["bash"], mnt.mountpoint)   # stdin /dev/null
    assert p.returncode == 0 and p.stderr == b""


def json_result(p):
    doc = json.loads(p.stdout.decode())
    assert isinstance(doc, dict)
    return doc


def test_json_says_when_output_was_not_utf8(service, mnt):
    p = mbx(service, ["--json", "sh", "-c", "printf 'a\\377b'; printf ok >&2"], mnt.mountpoint)
    doc = json_result(p)
    assert p.returncode == 0 and doc["exitCode"] == 0
    assert doc["stdout"] == "a\ufffdb" and doc["stdoutLossy"] is True
    assert doc["stderr"] == "ok" and doc["stderrLossy"] is False
    assert "error" not in doc


def test_json_exit_code_is_mbexecs_own_on_timeout(service, mnt):
    p = mbx(service, ["--json", "--timeout", "1", "sleep", "30"], mnt.mountpoint)
    doc = json_result(p)
    assert p.returncode == 124
    assert doc["exitCode"] == 124 and doc["timedOut"] is True, doc


def test_json_cuts_each_stream_at_8_mib_and_says_so(service, mnt):
    p = mbx(service, ["--json", "sh", "-c", "head -c 9437184 /dev/zero | tr '\\0' x"],
            mnt.mountpoint)
    doc = json_result(p)
    assert p.returncode == 0 and doc["exitCode"] == 0
    assert len(doc["stdout"]) == 8 * 1024 * 1024 and doc["stdoutTruncated"] is True
    assert doc["stderrTruncated"] is False
    # --help says so where --json is, as mbexec(1) does
    p = mbx(service, ["--help"], mnt.mountpoint)
    text = " ".join(p.stdout.decode().split())
    assert "--json capture the output, print one JSON result at the end (each stream up to 8 MiB; " \
        "bytes that are not UTF-8 become U+FFFD; fields in mbexec(1))" in text, text


@pytest.mark.parametrize("args,said", [
    (["--json", "--timeout", "abc", "true"], "invalid --timeout 'abc' (examples: 30, 500ms, 2m, 1h)"),
    (["--json", "--bogus", "true"], "unknown option '--bogus'"),
    (["--json"], "no command given"),
    (["--json", "-t", "bash"], "--json captures the output and cannot be used with -t")])
def test_json_has_an_error_on_a_usage_error(service, mnt, args, said):
    p = mbx(service, args, mnt.mountpoint)
    doc = json_result(p)
    assert p.returncode == 125 and doc["exitCode"] is None and doc["error"] == said, doc
    assert p.stderr.decode() == ("mbexec: %s\nTry 'mbexec --help' for more information.\n"
                                 % said), p.stderr
    # without --json, only the message
    p = mbx(service, ["--timeout", "abc", "true"], mnt.mountpoint)
    assert p.returncode == 125 and p.stdout == b"" and b"invalid --timeout" in p.stderr


def test_json_has_an_error_outside_a_mount(service, tmp_path):
    p = mbtest.run_mbexec(service, ["--json", "true"], cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    doc = json_result(p)
    assert p.returncode == 125
    assert doc["exitCode"] is None
    assert "is not inside a Mainbrella mount" in doc["error"], doc
    assert p.stderr.decode() == "mbexec: " + doc["error"] + "\n"


# --- the API key and --mount, said once ---

def refused(stats):
    return sum(per.get("401", 0) for per in stats["statuses"].values())


def test_key_messages_say_it_once_and_send_nothing(service, mnt, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    bare = {"MAINBRELLA_API_KEY": "", "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    not_a_key = tmp_path / "id_rsa"
    not_a_key.write_text("-----BEGIN-OPENSSH-PRIVATE-KEY-----\n")
    os.chmod(str(not_a_key), 0o600)
    before = service.stats()
    p = mbx(service, ["true"], mnt.mountpoint, env=bare)
    assert p.returncode == 125
    assert p.stderr.decode() == (
        "mbexec: no API key: set MAINBRELLA_API_KEY, MAINBRELLA_API_KEY_FILE, a profile's "
        "key_file or create '%s/.config/mainbrella/api-key' (mode 600)\n" % home)
    # a file that holds something else is never sent as a key
    p = mbx(service, ["--key-file", str(not_a_key), "true"], mnt.mountpoint, env=bare)
    assert p.returncode == 125
    said = ("key file '%s' does not hold a Mainbrella API key ('mb_' and 64 hex digits)"
            % not_a_key)
    assert p.stderr.decode() == "mbexec: " + said + "\n"
    r = mbfs(service, ["-f", "-o", "key_file=" + str(not_a_key), "%s:/workspace" % mnt.ident["id"],
                       str(tmp_path)], env=bare)
    assert r.returncode != 0 and err_lines(r) == ["mbfs: " + said]
    for prog in ("mbexec", "mbfs"):
        args = ["true"] if prog == "mbexec" else ["-f", "small:/workspace", str(tmp_path)]
        p = (mbx(service, args, mnt.mountpoint, env=dict(bare, MAINBRELLA_API_KEY="hunter2"))
             if prog == "mbexec" else
             mbfs(service, args, env=dict(bare, MAINBRELLA_API_KEY="hunter2")))
        assert p.stderr.decode() == ("%s: MAINBRELLA_API_KEY is not a Mainbrella API key "
                                     "('mb_' and 64 hex digits)\n" % prog), p.stderr
    # none of them went out: the service refused no key (the mount's own
    # requests, with the right key, may go on meanwhile)
    assert refused(service.stats()) == refused(before)


def test_mount_outside_a_mount_is_named_once(service, tmp_path):
    for extra in ([], ["--json"]):
        p = mbtest.run_mbexec(service, extra + ["--mount", str(tmp_path), "true"], cwd="/",
                              stdin=subprocess.DEVNULL)
        assert p.returncode == 125
        said = "--mount: '%s' is not inside a Mainbrella mount" % tmp_path
        assert p.stderr.decode() == "mbexec: " + said + "\n", p.stderr
        if extra:
            assert json.loads(p.stdout.decode())["error"] == said
