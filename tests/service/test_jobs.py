# Managed executions (§5): create and idempotency, statuses, GET/list/cancel,
# SSE (ids, cursor, status frame, rotation, stream limit), stdin, signals,
# PTY and resize, output limit, history limit, stop cancels jobs.

import http.client
import json
import secrets
import threading
import time

from svchelpers import create_container, wait_for

TERMINAL = ("succeeded", "failed", "timed_out", "output_limit", "canceled", "interrupted")


def start(c, key=None, expect=202, **spec):
    r = c.api.post("/containers/executions", c.q, spec, headers={"Idempotency-Key": key or secrets.token_hex(6)})
    assert r.status == expect, r
    return r.json()


def job(c, eid):
    r = c.api.get("/containers/executions/" + eid, c.q)
    assert r.status == 200, r
    return r.json()


def finish(c, eid, timeout=20):
    return wait_for(lambda: (lambda d: d if d["status"] in TERMINAL else None)(job(c, eid)), timeout)


def running(c, eid):
    return wait_for(lambda: job(c, eid)["status"] == "running")


def sse(c, eid, cursor=None, port=None):
    """Read one SSE connection to its end; returns (frames, raw text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port or c.api.port, timeout=60)
    q = "id=%s&createdAt=%s" % (c.id, c.created_at) + ("&cursor=%d" % cursor if cursor is not None else "")
    conn.request("GET", "/containers/executions/%s/events?%s" % (eid, q),
                 headers={"Authorization": "Bearer " + c.api.key})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    assert r.getheader("content-type") == "text/event-stream"
    raw = r.read().decode()
    conn.close()
    frames = []
    for block in raw.split("\n\n"):
        if not block:
            continue
        f = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                f["comment"] = line
            else:
                k, _, v = line.partition(": ")
                f[k] = v
        frames.append(f)
    return frames, raw


def test_create_run_and_get(container):
    s = start(container, command="echo hi; echo oops >&2; exit 3")
    assert s["status"] == "starting" and s["createdAt"] == container.created_at
    assert s["cursor"] == 0 and s["stdinEnabled"] is False and s["stdinClosed"] is True
    assert s["retainUntil"] > time.time() * 1000 + 3500000
    assert "finishedAt" not in s and "pty" not in s
    d = finish(container, s["id"])
    assert d["status"] == "failed" and d["exitCode"] == 3
    assert d["stdout"] == "hi\n" and d["stderr"] == "oops\n" and d["cursor"] == 2 and d["outputBytes"] == 8
    assert "finishedAt" in d
    ok = finish(container, start(container, argv=["printf", "%s-%s", "a", "b"])["id"])
    assert ok["status"] == "succeeded" and ok["exitCode"] == 0 and ok["stdout"] == "a-b"
    bad = finish(container, start(container, argv=["no-such-program-xyz"])["id"])
    assert bad["status"] == "failed" and bad["exitCode"] == 127          # GNU timeout could not run it
    assert "no-such-program-xyz" in bad["stderr"]
    nocwd = finish(container, start(container, command="true", cwd="/nowhere")["id"])
    assert nocwd["status"] == "failed" and nocwd["exitCode"] is None     # nothing started
    env = finish(container, start(container, command="echo $FOO; pwd", env={"FOO": "bar"}, cwd="/tmp")["id"])
    assert env["stdout"] == "bar\n/tmp\n"
    listed = container.api.get("/containers/executions", container.q).json()["executions"]
    assert {s["id"], env["id"]} <= {e["id"] for e in listed}
    assert all("stdout" not in e for e in listed)


def test_idempotency(container):
    a = start(container, "key-1", command="sleep 0.2")
    b = start(container, "key-1", command="sleep 0.2", timeoutMs=30000, env={}, stdin=False)
    assert a["id"] == b["id"]
    r = container.api.post("/containers/executions", container.q, {"command": "sleep 0.3"},
                           headers={"Idempotency-Key": "key-1"})
    assert (r.status, r.error) == (409, "idempotency_key_conflict")
    r = container.api.post("/containers/executions", container.q, {"command": "true"})
    assert (r.status, r.error) == (400, "invalid_idempotency_key")
    finish(container, a["id"])
    again = start(container, "key-1", command="sleep 0.2")
    assert again["id"] == a["id"] and again["status"] == "succeeded"
    stats = container.api.get("/_local/stats").json()
    assert stats["jobsCreated"][container.id] >= 1


def test_spec_validation(container):
    bad = [{}, {"command": "x", "argv": ["x"]}, {"argv": []}, {"argv": [""]}, {"argv": ["a"] * 65},
           {"command": "x", "timeoutMs": 900001}, {"command": "x", "stdin": 1}, {"command": "x", "cwd": "tmp"},
           {"command": "x", "env": {"1A": "x"}}, {"command": "x", "env": {"A": 1}},
           {"command": "x", "pty": {"cols": 80, "rows": 24}},
           {"command": "x", "stdin": True, "pty": {"cols": 0, "rows": 24}},
           {"command": "x", "stdin": True, "pty": {"cols": 80}}, {"command": "x", "other": 1}]
    for body in bad:
        r = container.api.post("/containers/executions", container.q, body, headers={"Idempotency-Key": "v"})
        assert (r.status, r.error) == (400, "invalid_request"), body


def test_sse_ids_cursor_and_status(container):
    s = start(container, command="echo a; echo b >&2; sleep 0.3; echo c")
    frames, raw = sse(container, s["id"])
    out = [f for f in frames if f.get("event") in ("stdout", "stderr")]
    assert [int(f["id"]) for f in out] == [1, 2, 3]
    assert [json.loads(f["data"])["sequence"] for f in out] == [1, 2, 3]
    assert json.loads(out[1]["data"]) == {"type": "stderr", "data": "b\n", "sequence": 2}
    last = frames[-1]
    assert last["event"] == "status" and "id" not in last
    assert json.loads(last["data"])["status"] == "succeeded"
    assert "retry:" not in raw
    frames, _ = sse(container, s["id"], cursor=2)
    assert [f.get("id") for f in frames if "id" in f] == ["3"]
    frames, _ = sse(container, s["id"], cursor=3)
    assert len(frames) == 1 and frames[0]["event"] == "status"
    r = container.api.get("/containers/executions/%s/events" % s["id"], container.query(cursor="4"))
    assert (r.status, r.error) == (400, "invalid_cursor")
    r = container.api.get("/containers/executions/%s/events" % s["id"], container.query(cursor="-1"))
    assert (r.status, r.error) == (400, "invalid_cursor")
    other = "00000000-0000-4000-8000-000000000000"
    assert container.api.get("/containers/executions/" + other, container.q).error == "execution_not_found"


def test_sse_heartbeats_and_rotation(start_service):
    svc = start_service("--stream-ms", "2500")
    c = create_container(svc.api)
    s = start(c, command="echo first; sleep 30")
    t = time.monotonic()
    frames, _ = sse(c, s["id"])
    # the stream ended at its rotation (2.5 s), long before the command
    assert 2.0 < time.monotonic() - t < 25
    assert sum(1 for f in frames if f.get("comment") == ": heartbeat") >= 2
    assert frames[-1]["event"] == "status" and json.loads(frames[-1]["data"])["status"] == "running"
    assert c.api.delete("/containers/executions/" + s["id"], c.q).json()["status"] == "running"
    assert finish(c, s["id"])["status"] == "canceled"
    c.delete()


def test_stream_limit(container):
    s = start(container, command="sleep 30")
    conns = []
    for _ in range(8):
        conn = http.client.HTTPConnection("127.0.0.1", container.api.port, timeout=30)
        conn.request("GET", "/containers/executions/%s/events?id=%s&createdAt=%s" % (s["id"], container.id,
                                                                                    container.created_at),
                      headers={"Authorization": "Bearer " + container.api.key})
        assert conn.getresponse().status == 200
        conns.append(conn)
    r = container.api.get("/containers/executions/%s/events" % s["id"], container.q)
    assert (r.status, r.error) == (429, "execution_stream_limit")
    for conn in conns:
        conn.close()
    container.api.delete("/containers/executions/" + s["id"], container.q)
    finish(container, s["id"])
    wait_for(lambda: container.api.get("/containers/executions/%s/events" % s["id"], container.q).status == 200,
             timeout=5)


def test_stdin(container):
    s = start(container, command="cat; echo END", stdin=True)
    assert s["stdinEnabled"] is True and s["stdinClosed"] is False
    running(container, s["id"])
    r = container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"hello ")
    assert r.json() == {"bytes": 6, "stdinClosed": False}
    assert container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"").status == 200
    r = container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"x" * 65537)
    assert (r.status, r.error) == (413, "stdin_too_large")
    r = container.api.delete("/containers/executions/%s/stdin" % s["id"], container.q)
    assert r.json() == {"bytes": 0, "stdinClosed": True}
    r = container.api.delete("/containers/executions/%s/stdin" % s["id"], container.q)
    assert (r.status, r.error) == (409, "stdin_closed")
    d = finish(container, s["id"])
    assert d["stdout"] == "hello END\n" and d["stdinBytes"] == 6
    r = container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"late")
    assert (r.status, r.error) == (409, "execution_not_running")
    n = start(container, command="sleep 5")
    running(container, n["id"])
    r = container.api.post("/containers/executions/%s/stdin" % n["id"], container.q, b"x")
    assert (r.status, r.error) == (409, "stdin_closed")
    container.api.delete("/containers/executions/" + n["id"], container.q)


def test_stdin_limits(container):
    s = start(container, command="sleep 60", stdin=True)       # never reads: the pipe fills
    running(container, s["id"])
    path = "/containers/executions/%s/stdin" % s["id"]
    chunk = b"x" * 65536
    codes = []

    def send():
        a = container.api.fresh()
        codes.append(a.post(path, container.q, chunk).status)
        a.close()
    # the first fills the 64 KiB pipe and returns once written; the next
    # four wait there, pending (256 KiB: the limit). Sent together, the
    # fifth could come before the first left the pending bytes
    send()
    assert codes == [200]
    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: job(container, s["id"])["stdinBytes"] == 5 * 65536, 60)   # all five taken
    r = container.api.post(path, container.q, b"y")
    assert (r.status, r.error) == (429, "stdin_limit")           # 256 KiB pending
    assert job(container, s["id"])["stdinBytes"] == 5 * 65536
    container.api.delete("/containers/executions/" + s["id"], container.q)
    for t in threads:
        t.join()
    total = start(container, command="cat > /dev/null", stdin=True)
    running(container, total["id"])
    path = "/containers/executions/%s/stdin" % total["id"]
    for _ in range(16):
        assert container.api.post(path, container.q, chunk).status == 200
    r = container.api.post(path, container.q, b"z")
    assert (r.status, r.error) == (429, "stdin_limit")            # 1 MiB total
    container.api.delete(path, container.q)
    assert finish(container, total["id"])["stdinBytes"] == 1048576


def test_signals(container):
    s = start(container, command="trap 'echo got INT; exit 9' INT; echo ready; while :; do sleep 0.1; done")
    wait_for(lambda: "ready" in job(container, s["id"])["stdout"])
    path = "/containers/executions/%s/signal" % s["id"]
    assert container.api.post(path, container.q, {"signal": "SIGHUP"}).error == "invalid_request"
    r = container.api.post(path, container.q, {"signal": "SIGINT"})
    assert r.status == 202 and r.json()["status"] == "running"
    d = finish(container, s["id"])
    assert d["status"] == "failed" and d["exitCode"] == 9 and "got INT" in d["stdout"]
    r = container.api.post(path, container.q, {"signal": "SIGTERM"})
    assert (r.status, r.error) == (409, "execution_not_running")
    k = start(container, command="sleep 30")
    running(container, k["id"])
    assert container.api.post("/containers/executions/%s/signal" % k["id"], container.q,
                              {"signal": "SIGKILL"}).status == 202
    assert finish(container, k["id"])["status"] == "canceled"
    t = start(container, command="sleep 30")
    running(container, t["id"])
    container.api.post("/containers/executions/%s/signal" % t["id"], container.q, {"signal": "SIGTERM"})
    d = finish(container, t["id"])
    # timeout died of the SIGTERM it re-raised (null); a SIGTERM that comes
    # while the login shell still waits for sleep gives 143: the contract
    # (mainbrella-api.md §5, timeout race) leaves both open
    assert d["status"] == "failed" and d["exitCode"] in (None, 143), d


def test_pty_and_resize(container):
    s = start(container, command="stty size; read x; stty size; echo got:$x", stdin=True,
              pty={"cols": 100, "rows": 30})
    assert s["pty"] == {"cols": 100, "rows": 30}
    wait_for(lambda: "30 100" in job(container, s["id"])["stdout"])
    r = container.api.post("/containers/executions/%s/resize" % s["id"], container.q, {"cols": 120, "rows": 40})
    assert r.status == 200 and r.json()["pty"] == {"cols": 120, "rows": 40}
    assert container.api.post("/containers/executions/%s/resize" % s["id"], container.q,
                              {"cols": 120}).error == "invalid_request"
    container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"abc\n")
    d = finish(container, s["id"])
    assert d["status"] == "succeeded"
    assert "40 120" in d["stdout"] and "got:abc" in d["stdout"] and "\r\n" in d["stdout"] and d["stderr"] == ""
    r = container.api.post("/containers/executions/%s/resize" % s["id"], container.q, {"cols": 1, "rows": 1})
    assert (r.status, r.error) == (409, "pty_unavailable")


def test_timeout_and_output_limit(container):
    t = finish(container, start(container, command="echo x; sleep 10", timeoutMs=500)["id"])
    assert t["status"] == "timed_out" and t["timedOut"] is True and t["exitCode"] is None
    o = finish(container, start(container, command="head -c 2000000 /dev/zero; sleep 10")["id"])
    assert o["status"] == "output_limit" and o["outputTruncated"] is True
    assert o["outputBytes"] == 1048576 and len(o["stdout"]) == 1048576 and o["cursor"] <= 512
    many = finish(container, start(container, command="for i in $(seq 700); do echo $i; sleep 0.003; done")["id"])
    assert many["status"] == "succeeded" and 380 <= many["cursor"] <= 512
    assert many["stdout"] == "".join("%d\n" % i for i in range(1, 701))


def test_jobs_hold_pool_slots(container):
    jobs = [start(container, command="sleep 30") for _ in range(4)]
    for j in jobs:
        running(container, j["id"])
    r = container.api.post("/containers/exec", container.q, {"command": "true"})
    assert (r.status, r.error) == (429, "execution_limit")
    r = container.api.post("/containers/executions", container.q, {"command": "true"},
                           headers={"Idempotency-Key": "fifth"})
    assert (r.status, r.error) == (429, "execution_limit")
    container.api.delete("/containers/executions/" + jobs[0]["id"], container.q)
    finish(container, jobs[0]["id"])
    assert container.exec("true")["exitCode"] == 0


def test_stop_cancels_jobs_and_keeps_records(container):
    s = start(container, command="sleep 30")
    running(container, s["id"])
    container.delete()
    d = finish(container, s["id"])
    assert d["status"] == "canceled"
    listed = container.api.get("/containers/executions", container.q).json()["executions"]
    assert [e["id"] for e in listed] == [s["id"]]
    r = container.api.post("/containers/executions", container.q, {"command": "true"},
                           headers={"Idempotency-Key": "after-stop"})
    assert (r.status, r.error) == (409, "container_not_running")
    r = container.api.post("/containers/executions/%s/stdin" % s["id"], container.q, b"x")
    assert (r.status, r.error) == (409, "container_not_running")


def test_history_limit_across_generations(start_service):
    svc = start_service("--retention-ms", "7000")
    c = create_container(svc.api)
    for i in range(20):
        finish(c, start(c, command="true")["id"])
    c.delete()
    c2 = create_container(svc.api)
    assert c2.id == c.id
    last = None
    for i in range(12):
        last = finish(c2, start(c2, command="true")["id"])
    r = c2.api.post("/containers/executions", c2.q, {"command": "true"}, headers={"Idempotency-Key": "over"})
    assert (r.status, r.error) == (429, "execution_history_limit")
    time.sleep(max(0.0, last["retainUntil"] / 1000.0 - time.time()) + 0.2)
    assert c2.api.get("/containers/executions", c2.q).json()["executions"] == []
    start(c2, command="true")
    c2.delete()
