# Local-only extensions: /_local/stats, /_local/faults, /_local/expire, and
# the --latency-ms option.

import http.client
import socket
import time

from svchelpers import create_container


def test_stats_counts_and_reset(start_service):
    svc = start_service()
    api = svc.api
    c = create_container(api, catalogId="python")
    assert api.delete("/_local/stats").json() == {"ok": True}
    c.put("/workspace/a", b"x")
    c.get("/workspace/a")
    c.get("/workspace/missing")
    api.get("/containers/executions/00000000-0000-4000-8000-000000000000", c.q)
    doc = api.get("/_local/stats").json()
    assert doc["requests"]["GET /containers/files"] == 2
    assert doc["requests"]["PUT /containers/files"] == 1
    assert doc["statuses"]["GET /containers/files"] == {"200": 1, "404": 1}
    assert doc["requests"]["GET /containers/executions/{eid}"] == 1
    assert doc["peakConcurrentOps"] == {c.id: 1}
    assert not any(k.startswith("GET /_local") for k in doc["requests"])
    api.delete("/_local/stats")
    assert api.get("/_local/stats").json() == {"requests": {}, "statuses": {}, "peakConcurrentOps": {},
                                               "jobsCreated": {}, "zombies": {c.id: 0},
                                               "guestCpuMs": {c.id: 0}}
    assert api.get("/_local/stats", auth=False).status == 401


def test_fault_before_and_after(start_service):
    svc = start_service()
    api = svc.api
    c = create_container(api, catalogId="python")
    rule = {"route": "PUT /containers/files", "count": 1, "status": 503, "error": "files_unavailable",
            "when": "before"}
    assert api.post("/_local/faults", body=rule).json() == {"ok": True}
    r = c.put("/workspace/f", b"one")
    assert (r.status, r.error) == (503, "files_unavailable")
    assert c.get("/workspace/f").error == "file_not_found"           # not performed
    rule["when"] = "after"
    api.post("/_local/faults", body=rule)
    r = c.put("/workspace/f", b"two")
    assert (r.status, r.error) == (503, "files_unavailable")
    assert c.get("/workspace/f").body == b"two"                     # performed
    assert c.put("/workspace/f", b"three").status == 200            # one-shot
    api.post("/_local/faults", body={"route": "GET /containers/files", "count": 2, "status": 500,
                                     "error": "boom", "match": "path=%2Fworkspace%2Fonly"})
    assert c.get("/workspace/f").status == 200                       # no match
    c.put("/workspace/only", b"o")
    assert c.get("/workspace/only").status == 500
    assert c.get("/workspace/only").status == 500
    assert c.get("/workspace/only").status == 200
    api.post("/_local/faults", body=rule)
    assert api.delete("/_local/faults").json() == {"ok": True}
    assert c.put("/workspace/f", b"four").status == 200
    assert api.post("/_local/faults", body={"route": "x"}).error == "invalid_request"


def _raw_get(port, key, target):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % (target, key)).encode())
    data = b""
    err = None
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError as e:
        err = e
    s.close()
    return data, err


def test_fault_reset_and_delay(start_service):
    svc = start_service()
    api = svc.api
    c = create_container(api, catalogId="python")
    c.put("/workspace/big", b"z" * 100000)
    api.post("/_local/faults", body={"route": "GET /containers/files", "count": 1, "reset": True,
                                     "afterBytes": 1000})
    target = "/containers/files?id=%s&createdAt=%s&path=/workspace/big" % (c.id, c.created_at)
    data, err = _raw_get(svc.port, svc.key, target)
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"content-length: 100000" in head and len(body) == 1000 and err is not None
    assert c.get("/workspace/big").body == b"z" * 100000
    api.post("/_local/faults", body={"route": "GET /containers/files", "count": 1, "delayMs": 700})
    t = time.monotonic()
    assert c.get("/workspace/big").status == 200
    assert time.monotonic() - t >= 0.7
    # SSE: reset after K bytes of the stream
    r = api.post("/containers/executions", c.q, {"command": "echo one; sleep 0.5; echo two"},
                 headers={"Idempotency-Key": "sse-reset"})
    eid = r.json()["id"]
    api.post("/_local/faults", body={"route": "GET /containers/executions/{eid}/events", "count": 1,
                                     "reset": True, "afterBytes": 10})
    data, err = _raw_get(svc.port, svc.key, "/containers/executions/%s/events?id=%s&createdAt=%s"
                         % (eid, c.id, c.created_at))
    assert len(data.partition(b"\r\n\r\n")[2]) == 10 and err is not None


def test_expire(start_service):
    svc = start_service()
    api = svc.api
    c = create_container(api)
    r = api.post("/containers/executions", c.q, {"command": "sleep 30"}, headers={"Idempotency-Key": "e"})
    eid = r.json()["id"]
    c.exec("setsid sleep 300 > /dev/null 2>&1 < /dev/null &")
    assert api.post("/_local/expire", c.q).json() == {"ok": True}
    assert api.post("/containers/exec", c.q, {"command": "true"}).error == "container_not_running"
    assert api.get("/containers/executions/" + eid, c.q).json()["status"] == "canceled"
    assert api.post("/_local/expire", c.q).error == "container_not_running"


def test_latency(start_service):
    svc = start_service("--latency-ms", "150")
    t = time.monotonic()
    for _ in range(3):
        assert svc.api.get("/capabilities").status == 200
    assert time.monotonic() - t >= 0.45
    conn = http.client.HTTPConnection("127.0.0.1", svc.port)
    t = time.monotonic()
    conn.request("GET", "/capabilities")
    conn.getresponse().read()
    assert time.monotonic() - t >= 0.15
