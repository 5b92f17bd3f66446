# Transport rules (§1, §9.6-7): origin, OPTIONS, 404/405, origin_required, exact
# key comparison, the JSON body cap, query validation codes per route and the check order.

import socket
import subprocess
import sys

from svchelpers import SERVICE, Api, create_container

GEN = "2026-01-01T00:00:00.000Z"


def test_capabilities_public_and_query_rejected(api):
    r = api.get("/capabilities", auth=False)
    assert r.status == 200
    doc = r.json()
    assert doc["apiVersion"] == "2026-10-05"
    assert doc["execution"]["maxConcurrentOperations"] == 4
    assert doc["files"]["maxFileBytes"] == 1048576
    assert doc["persistence"]["exports"] is True
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.headers["cache-control"] == "no-store"
    assert api.get("/capabilities?x=1", raw_path=True).error == "invalid_request"
    assert api.get("/capabilities?", raw_path=True).status == 200


def test_origin_rules(api):
    r = api.get("/containers", headers={"Origin": "https://evil.example"})
    assert (r.status, r.error) == (403, "origin_not_allowed")
    r = api.get("/containers", headers={"Origin": "http://localhost:5173"})
    assert r.status == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
    r = api.get("/containers")
    assert "access-control-allow-origin" not in r.headers
    r = api.request("OPTIONS", "/containers/exec", auth=False, headers={"Origin": "https://mainbrella.com"})
    assert r.status == 204


def test_auth(api):
    r = api.get("/containers", auth=False)
    assert (r.status, r.error) == (401, "not_authenticated")
    r = api.get("/containers", auth=False, headers={"Authorization": "Bearer mb_" + "0" * 64})
    assert (r.status, r.error) == (401, "not_authenticated")
    r = api.get("/containers", auth=False, headers={"Authorization": "Basic abc"})
    assert r.status == 401
    r = api.get("/containers", auth=False, headers={"Authorization": "bearer " + api.key})
    assert r.status == 200                                   # the format check ignores case...
    r = api.get("/containers", auth=False, headers={"Authorization": "Bearer " + api.key.upper().replace("MB_", "mb_")})
    assert (r.status, r.error) == (401, "not_authenticated")   # ...the hashed key does not
    for bad in ("Bearer " + api.key.replace("mb_", "MB_"), "Bearer  " + api.key, "Bearer\t" + api.key,
                "Bearer " + api.key + "0", "Bearer " + api.key[3:], api.key):
        r = api.get("/containers", auth=False, headers={"Authorization": bad})
        assert (r.status, r.error) == (401, "not_authenticated"), bad


def test_route_and_method(api):
    r = api.get("/nope")
    assert (r.status, r.error) == (404, "not_found")
    r = api.request("PATCH", "/containers/exec", "id=small&createdAt=" + GEN)
    assert (r.status, r.error) == (405, "method_not_allowed")
    assert "POST" in r.headers["allow"]
    assert api.get("/containers/files/bogus", {"id": "small", "createdAt": GEN}).error == "not_found"
    assert api.get("/containers/executions/NOT-A-UUID", {"id": "small", "createdAt": GEN}).status == 404


def test_origin_required_before_query_and_auth(api):
    r = api.post("/containers/exec", "bad=1", {"command": "true"}, auth=False)
    assert (r.status, r.error) == (403, "origin_required")


def test_query_errors_come_before_auth(api):
    r = api.post("/containers/exec", "id=small&createdAt=" + GEN + "&x=1", {"command": "true"}, auth=False,
                 headers={"Origin": "https://mainbrella.com"})
    assert (r.status, r.error) == (400, "invalid_container_id")


def test_query_codes_per_route(api):
    ok = {"id": "small", "createdAt": GEN}
    cases = [
        ("POST", "/containers/exec", ok, [("extra", "1")], "invalid_container_id"),
        ("GET", "/containers/files", dict(ok, path="/workspace/a"), [("extra", "1")], "invalid_container_id"),
        ("GET", "/containers/executions", ok, [("extra", "1")], "invalid_container_id"),
        ("GET", "/containers/files/list", dict(ok, path="/"), [("extra", "1")], "invalid_request"),
        ("GET", "/containers/export", ok, [("extra", "1")], "invalid_request"),
        ("GET", "/containers", {}, [("x", "1")], "invalid_container_id"),
        ("GET", "/containers", {}, [("createdAt", GEN)], "invalid_request"),
    ]
    for method, path, base, extra, code in cases:
        r = api.request(method, path, list(base.items()) + extra, body=b"{}" if method == "POST" else None)
        assert (r.status, r.error) == (400, code), (method, path)
    # duplicates
    r = api.get("/containers/files", [("id", "small"), ("id", "small"), ("createdAt", GEN), ("path", "/a")])
    assert r.error == "invalid_container_id"
    r = api.get("/containers/files/stat", [("id", "small"), ("createdAt", GEN), ("path", "/"), ("path", "/")])
    assert r.error == "invalid_request"
    r = api.delete("/containers", [("createdAt", GEN), ("createdAt", GEN)])
    assert r.error == "invalid_request"


def test_id_and_generation_validation(api):
    for cid in ("c0", "c500", "C1", "large", "c01"):
        assert api.post("/containers/exec", {"id": cid, "createdAt": GEN}, {"command": "x"}).error == "invalid_container_id"
    for gen in ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000+00:00", "2026-02-30T00:00:00.000Z", ""):
        assert api.post("/containers/exec", {"id": "c499", "createdAt": gen}, {"command": "x"}).error == "invalid_generation"
    assert api.get("/containers/export", {"id": "small", "createdAt": "x"}).error == "invalid_request"
    assert api.get("/containers/files", {"id": "small", "createdAt": GEN, "path": "/a/"}).error == "invalid_file_path"
    assert api.get("/containers/files/stat", {"id": "small", "createdAt": GEN, "path": "a"}).error == "invalid_request"


def test_stopped_generation_is_409(api):
    r = api.post("/containers/exec", {"id": "c42", "createdAt": GEN}, {"command": "true"})
    assert (r.status, r.error) == (409, "container_not_running")


def test_json_body_rules(api):
    q = {"id": "small", "createdAt": GEN}
    assert api.post("/containers/exec", q, b"\xff{}").error == "invalid_request"
    assert api.post("/containers/exec", q, b"[]").error == "invalid_request"
    assert api.post("/containers/exec", q, {"command": "true", "x": 1}).error == "invalid_request"
    r = api.post("/containers/exec", q, b"{" + b" " * 40000 + b"}")
    assert (r.status, r.error) == (413, "request_too_large")


def test_keep_alive_and_chunked_upload(api, service):
    s = socket.create_connection(("127.0.0.1", service.port))
    req = ("GET /capabilities HTTP/1.1\r\nHost: x\r\n\r\n" * 2).encode()
    s.sendall(req)
    data = b""
    while data.count(b"HTTP/1.1 200") < 2:
        chunk = s.recv(65536)
        assert chunk
        data += chunk
    s.close()
    chunked = Api(service.port, service.key)
    r = chunked.request("POST", "/containers/exec", "id=small&createdAt=" + GEN,
                        body=iter([b'{"command":', b'"true"}']))
    assert r.error == "container_not_running"


def test_json_body_cap_counts_the_json(start_service):
    svc = start_service()                     # its own slot history: this admits a job
    c = create_container(svc.api)
    quotes = '"' * 16384                      # a valid 16 KiB command whose JSON escapes double it
    for path, headers in (("/containers/exec", {}), ("/containers/executions", {"Idempotency-Key": "cap"})):
        r = c.api.post(path, c.q, {"command": quotes}, headers=headers)
        assert (r.status, r.error) == (413, "request_too_large"), path
        r = c.api.post(path, c.q, {"command": "a" * 16384}, headers=headers)
        assert r.status in (200, 202), (path, r)


def test_lenient_auth_flag(start_service):
    svc = start_service("--lenient-auth")
    r = svc.api.get("/containers", auth=False, headers={"Authorization": "bearer " + svc.key.upper()})
    assert r.status == 200


def test_malformed_key_is_refused_at_startup(tmp_path):
    for key in ("mb_" + "0" * 63, "secret", "MB-" + "0" * 64):
        p = subprocess.run([sys.executable, SERVICE, "--listen", "127.0.0.1:0", "--state", str(tmp_path / "s"),
                            "--api-key", key], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "mb_ followed by 64 hex digits" in p.stderr and key not in p.stderr
