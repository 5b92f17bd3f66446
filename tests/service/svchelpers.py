# Helpers for the local service's contract suite: start tests/localservice.py on
# port 0 in a temp state dir, a small keep-alive HTTP client, container handles.

import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = os.path.join(os.path.dirname(HERE), "localservice.py")


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self):
        return json.loads(self.body)

    @property
    def error(self):
        try:
            return self.json().get("error")
        except ValueError:
            return None

    def __repr__(self):
        return "<Resp %d %r>" % (self.status, self.body[:200])


def qs(query):
    if query is None:
        return ""
    if isinstance(query, str):
        return "?" + query
    items = query.items() if isinstance(query, dict) else query
    return "?" + "&".join("%s=%s" % (urllib.parse.quote(k, safe=""), urllib.parse.quote(str(v), safe=""))
                          for k, v in items)


class Api:
    """Minimal client: one keep-alive connection per instance."""

    def __init__(self, port, key):
        self.port = port
        self.key = key
        self.conn = None

    def request(self, method, path, query=None, body=None, headers=None, auth=True, raw_path=False):
        hdrs = {}
        if auth:
            hdrs["Authorization"] = "Bearer " + self.key
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        target = path if raw_path else path + qs(query)
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                self.conn.request(method, target, body=body, headers=hdrs)
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self.close()
                return Resp(r.status, r.getheaders(), data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt:
                    raise

    def get(self, path, query=None, **kw):
        return self.request("GET", path, query, **kw)

    def post(self, path, query=None, body=None, **kw):
        return self.request("POST", path, query, body, **kw)

    def put(self, path, query=None, body=None, **kw):
        return self.request("PUT", path, query, body, **kw)

    def delete(self, path, query=None, **kw):
        return self.request("DELETE", path, query, **kw)

    def patch(self, path, query=None, body=None, **kw):
        return self.request("PATCH", path, query, body, **kw)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def fresh(self):
        return Api(self.port, self.key)


class Service:
    def __init__(self, tmp, *extra):
        self.key = "mb_" + secrets.token_hex(32)
        os.makedirs(tmp, exist_ok=True)
        self.state = os.path.join(tmp, "state")
        self.log = open(os.path.join(tmp, "service.log"), "w+")
        self.proc = subprocess.Popen([sys.executable, SERVICE, "--listen", "127.0.0.1:0", "--state", self.state,
                                      "--api-key", self.key, *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening http://127.0.0.1:"), line
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.api = Api(self.port, self.key)

    def stop(self):
        self.api.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.seek(0)
        return self.proc.returncode, self.log.read()


class Container:
    def __init__(self, api, doc):
        self.api = api
        self.id = doc["creation"]["containerId"]
        self.created_at = doc["creation"]["createdAt"]
        self.q = {"id": self.id, "createdAt": self.created_at}

    def query(self, **extra):
        q = dict(self.q)
        q.update(extra)
        return q

    def exec(self, command, timeout_ms=None):
        body = {"command": command}
        if timeout_ms:
            body["timeoutMs"] = timeout_ms
        r = self.api.post("/containers/exec", self.q, body)
        assert r.status == 200, r
        return r.json()

    def put(self, path, data):
        return self.api.put("/containers/files", self.query(path=path), data)

    def get(self, path):
        return self.api.get("/containers/files", self.query(path=path))

    def delete(self):
        return self.api.delete("/containers", self.q)


def create_container(api, **body):
    r = api.post("/containers", body=body or {}, headers={"Idempotency-Key": secrets.token_hex(8)})
    assert r.status == 200, r
    return Container(api, r.json())


def host_procs(marker):
    """Host pids of live processes whose command line contains marker (zombies have none)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def slot_index(cid):
    return 0 if cid == "small" else int(cid[1:])


def wait_for(pred, timeout=10.0, interval=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("condition not met within %.1fs" % timeout)
