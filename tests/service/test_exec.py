# Foreground exec (§3): exit codes, login shell, stdin at EOF, timeout,
# output truncation, UTF-8 replacement, body validation and the pool of 4.

import json
import threading
import time

MIB = 1048576


def test_exit_codes_and_streams(container):
    out = container.exec("echo out; echo err >&2; exit 7")
    assert out == {"stdout": "out\n", "stderr": "err\n", "exitCode": 7, "timedOut": False,
                   "outputTruncated": False}
    assert container.exec("kill -TERM $$")["exitCode"] == 143


def test_environment(container):
    out = container.exec("pwd; echo $HOME; id -u; test -t 0 && echo tty || echo notty; cat; echo done")
    assert out["stdout"].split() == ["/workspace", "/workspace", "1000", "notty", "done"]


def test_timeout(container):
    t = time.monotonic()
    out = container.exec("echo partial; sleep 5", timeout_ms=600)
    assert time.monotonic() - t < 3
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


def test_background_process_does_not_hold_exec(container):
    t = time.monotonic()
    out = container.exec("sleep 30 & echo started")
    assert out["stdout"] == "started\n" and time.monotonic() - t < 5


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
