# Foreground exec (§3, §9.3): exit codes, login shell, stdin at EOF, timeout,
# output truncation, UTF-8 replacement, pipes held by background children,
# client disconnects, body validation and the pool of 4.

import json
import socket
import threading
import time

from svchelpers import create_container, host_procs, wait_for

MIB = 1048576


def test_exit_codes_and_streams(container):
    out = container.exec("echo out; echo err >&2; exit 7")
    assert out == {"stdout": "out\n", "stderr": "err\n", "exitCode": 7, "timedOut": False,
                   "outputTruncated": False}
    # GNU timeout re-raises the shell's signal on itself: a signal death has no exit code.
    assert container.exec("kill -TERM $$")["exitCode"] is None


def test_environment(container):
    out = container.exec("pwd; echo $HOME; id -u; test -t 0 && echo tty || echo notty; cat; echo done")
    assert out["stdout"].split() == ["/workspace", "/root", "0", "notty", "done"]


def test_timeout(container):
    t = time.monotonic()
    out = container.exec("echo partial; sleep 30", timeout_ms=600)
    assert time.monotonic() - t < 25        # ended by its timeout, not by sleep
    assert out["timedOut"] is True and out["exitCode"] is None and out["stdout"] == "partial\n"


def test_truncation(container):
    out = container.exec("head -c %d /dev/zero; echo more" % MIB)
    assert out["outputTruncated"] is True and out["exitCode"] is None
    assert len(out["stdout"]) == MIB
    exact = container.exec("head -c %d /dev/zero | tr '\\0' a" % MIB)
    assert exact["outputTruncated"] is False and exact["exitCode"] == 0 and len(exact["stdout"]) == MIB
    split = container.exec("head -c %d /dev/zero; head -c 10 /dev/zero >&2" % (MIB - 4))
    assert split["outputTruncated"] is True and len(split["stdout"]) + len(split["stderr"]) == MIB


def test_utf8_replacement(container):
    out = container.exec("printf 'caf\\303\\251 \\377 end'; printf '\\342\\202' >&2")
    assert out["stdout"] == "caf\u00e9 \ufffd end"
    assert out["stderr"] == "\ufffd"
    lone = container.api.post("/containers/exec", container.q, b'{"command":"echo \\ud800"}')
    assert lone.json()["stdout"] == "\ufffd\n"


def test_background_child_holding_a_pipe_holds_exec(container):
    t = time.monotonic()
    out = container.exec("sleep 4711.5 & setsid sleep 4711.6 & echo started", timeout_ms=1500)
    assert time.monotonic() - t >= 1.4
    assert out == {"stdout": "started\n", "stderr": "", "exitCode": None, "timedOut": True,
                   "outputTruncated": False}
    wait_for(lambda: not host_procs("4711.5"), timeout=5)     # timeout's process group was killed...
    assert host_procs("4711.6")                               # ...but not the session that left it
    assert container.exec("pkill -f 'sleep 4711[.]6'; echo ok")["stdout"] == "ok\n"


def test_normal_exit_kills_nothing(container):
    t = time.monotonic()
    out = container.exec("sleep 4712.5 >/dev/null 2>&1 & echo started")
    assert out["exitCode"] == 0 and out["stdout"] == "started\n" and time.monotonic() - t < 5
    time.sleep(0.3)
    assert host_procs("4712.5")
    container.exec("pkill -f 'sleep 4712[.]5'")


def _raw_exec(c, command):
    body = json.dumps({"command": command, "timeoutMs": 30000}).encode()
    s = socket.create_connection(("127.0.0.1", c.api.port))
    s.sendall(("POST /containers/exec?id=%s&createdAt=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % (c.id, c.created_at, c.api.key, len(body))).encode() + body)
    return s


def _read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_client_disconnect_kills_exec(container):
    s = _raw_exec(container, "sleep 4713.5; echo late > /workspace/late")
    wait_for(lambda: host_procs("4713.5"))
    s.shutdown(socket.SHUT_WR)                       # still listening: the answer is a 503
    data = _read_all(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 503") and b'{"error":"execution_unavailable"}' in data
    wait_for(lambda: not host_procs("4713.5"), timeout=5)
    s = _raw_exec(container, "sleep 4713.6; echo late > /workspace/late")
    wait_for(lambda: host_procs("4713.6"))
    s.close()                                        # gone entirely: the same kill
    wait_for(lambda: not host_procs("4713.6"), timeout=5)
    assert container.get("/workspace/late").error == "file_not_found"
    assert container.exec("echo pool-free")["stdout"] == "pool-free\n"


def test_lenient_exec_flag(start_service):
    svc = start_service("--lenient-exec")
    c = create_container(svc.api)
    t = time.monotonic()
    out = c.exec("sleep 4714.5 & echo started")
    assert out["exitCode"] == 0 and out["timedOut"] is False and time.monotonic() - t < 5
    assert host_procs("4714.5")
    s = _raw_exec(c, "sleep 1; echo done")
    s.shutdown(socket.SHUT_WR)
    data = _read_all(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 200") and b'"stdout":"done\\n"' in data
    c.delete()


def test_body_validation(container):
    api = container.api
    for body in ({"command": "  "}, {"command": "a\0b"}, {"command": "x" * 16385}, {"command": "true", "timeoutMs": 0},
                 {"command": "true", "timeoutMs": 60001}, {"command": "true", "timeoutMs": 1.5},
                 {"command": 5}, {}):
        r = api.post("/containers/exec", container.q, body)
        assert (r.status, r.error) == (400, "invalid_request"), body
    assert api.post("/containers/exec", container.q, {"command": "true", "timeoutMs": 60000}).status == 200
    multibyte = "echo " + "\u00e9" * 8190
    body = json.dumps({"command": multibyte}, ensure_ascii=False).encode()
    assert (api.post("/containers/exec", container.q, body).error) == "invalid_request"


def test_pool_of_four(container):
    results = []

    def run():
        a = container.api.fresh()
        results.append(a.post("/containers/exec", container.q, {"command": "sleep 1.5; echo ok"}))
        a.close()
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.6)
    r = container.api.post("/containers/exec", container.q, {"command": "touch /workspace/fifth"})
    assert (r.status, r.error) == (429, "execution_limit")
    r = container.api.get("/containers/files/stat", container.query(path="/workspace"))
    assert (r.status, r.error) == (429, "execution_limit")
    for t in threads:
        t.join()
    assert [r.status for r in results] == [200] * 4
    assert container.exec("test -e /workspace/fifth && echo yes || echo no")["stdout"] == "no\n"
    stats = container.api.get("/_local/stats").json()
    assert stats["peakConcurrentOps"][container.id] == 4


def test_exec_after_stop(container):
    container.delete()
    r = container.api.post("/containers/exec", container.q, {"command": "true"})
    assert (r.status, r.error) == (409, "container_not_running")
