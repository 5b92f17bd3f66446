# The HTTP layer: HTTP/1.1 keep-alive on ThreadingHTTPServer, request bodies
# (Content-Length or chunked), the common check order of §1.3 (origin,
# OPTIONS, route/method, origin_required, query, auth), simulated latency,
# fault injection, stats, and response writing (JSON, bytes, SSE streams).

import email.utils
import http.server
import io
import json
import logging
import socket
import struct
import time

from . import config
from .errors import ApiError
from .validate import Query

log = logging.getLogger("mbsvc.http")
DRAIN_LIMIT = 64 << 20
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


class Response:
    def __init__(self, status=200, body=b"", headers=None, stream=None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.stream = stream          # fn(write) for streamed bodies (no Content-Length)
        self.discard = None           # fn() releasing a stream's resources if it never runs
        self.reset_after = None       # bytes of body to send before a connection reset


def json_response(doc, status=200, headers=None):
    h = {"content-type": "application/json; charset=utf-8", "cache-control": "no-store"}
    h.update(headers or {})
    return Response(status, json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), h)


def error_response(err):
    return json_response(err.body(), err.status, err.headers)


class Request:
    """One parsed request, handed to route handlers."""

    def __init__(self, handler, method, path, raw_query, params):
        self.handler = handler
        self.method = method
        self.path = path
        self.raw_query = raw_query
        self.query = Query(raw_query)
        self.params = params
        self.headers = handler.headers
        self.service = handler.server.service
        self._remaining = None
        self._chunked = False
        self._consumed = False
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            self._chunked = True
        else:
            cl = self.headers.get("Content-Length")
            try:
                self._remaining = int(cl) if cl is not None else 0
                if self._remaining < 0:
                    raise ValueError
            except ValueError:
                handler.close_connection = True
                raise ApiError(400, "invalid_request")

    def header(self, name):
        return self.headers.get(name)

    def _read_chunked(self, limit):
        out = bytearray()
        rfile = self.handler.rfile
        while True:
            line = rfile.readline(65537)
            if not line:
                raise ApiError(400, "invalid_request")
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise ApiError(400, "invalid_request")
            if size == 0:
                while True:     # trailers
                    t = rfile.readline(65537)
                    if t in (b"\r\n", b"\n", b""):
                        break
                self._consumed = True
                return bytes(out)
            if len(out) + size > limit:
                self.handler.close_connection = True
                self._consumed = True
                raise _TooLarge()
            data = rfile.read(size)
            if len(data) < size:
                raise ApiError(400, "invalid_request")
            out += data
            rfile.readline()

    def body(self, cap, code="request_too_large", status=413):
        """Read the whole body (at most cap bytes) or raise ApiError(status, code)."""
        if self._consumed:
            return b""
        try:
            if self._chunked:
                return self._read_chunked(cap)
            n = self._remaining
            if n > cap:
                self.drain()
                raise ApiError(status, code)
            data = self.handler.rfile.read(n) if n else b""
            self._consumed = True
            if len(data) < n:
                self.handler.close_connection = True
                raise ApiError(400, "invalid_request")
            return data
        except _TooLarge:
            raise ApiError(status, code)
        except (OSError, ValueError):
            self.handler.close_connection = True
            raise ApiError(400, "invalid_request")

    def drain(self):
        """Discard an unread body so the connection can be reused (or mark it for closing)."""
        if self._consumed:
            return
        self._consumed = True
        if self._chunked or self._remaining > DRAIN_LIMIT:
            self.handler.close_connection = True
            return
        n = self._remaining
        try:
            while n > 0:
                data = self.handler.rfile.read(min(n, 1 << 20))
                if not data:
                    break
                n -= len(data)
        except OSError:
            self.handler.close_connection = True

    def json_body(self, cap):
        from .validate import parse_json_object
        return parse_json_object(self.body(cap))


class _TooLarge(Exception):
    pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mainbrella-local"
    sys_version = ""
    timeout = 900

    def setup(self):
        super().setup()
        try:   # responses are written whole; small SSE frames must not wait for ACKs
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):  # the base class logs to stderr; route via logging
        log.debug(fmt, *args)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_OPTIONS(self):
        self._handle("OPTIONS")

    def do_HEAD(self):
        self._handle("HEAD")

    def _handle(self, method):
        svc = self.server.service
        started = time.monotonic()
        path, _, raw_query = self.path.partition("?")
        match = svc.router.match(path)
        route_key = "%s %s" % (method, match[0].pattern if match else path)
        counted = not path.startswith("/_local/")
        if counted:
            svc.stats.request(route_key)
        req = None
        fault = None
        cors = {}
        try:
            origin = self.headers.get("Origin")
            if origin is not None:
                if origin not in config.ALLOWED_ORIGINS:
                    raise ApiError(403, "origin_not_allowed")
                cors = {"access-control-allow-origin": origin, "vary": "Origin",
                        "access-control-allow-credentials": "true"}
            req = Request(self, method, path, raw_query, match[1] if match else {})
            route = match[0] if match else None
            if method == "OPTIONS" and route is not None:
                resp = Response(204, b"", dict(cors, **{
                    "access-control-allow-methods": ", ".join(route.methods) + ", OPTIONS",
                    "access-control-allow-headers": "authorization, content-type, idempotency-key",
                    "access-control-max-age": "600"}))
            else:
                if route is None:
                    raise ApiError(404, "not_found")
                if method not in route.methods:
                    raise ApiError(405, "method_not_allowed",
                                   headers={"allow": ", ".join(route.methods) + ", OPTIONS"})
                if method in MUTATING and origin is None and self.headers.get("Authorization") is None:
                    raise ApiError(403, "origin_required")
                if route.query is not None:
                    route.query(req)
                if route.auth:
                    svc.authenticate(self.headers.get("Authorization"))
                if counted:
                    fault = svc.faults.take(route_key, self.path)
                if fault is not None and fault.status and fault.when == "before":
                    raise ApiError(fault.status, fault.error)
                if fault is not None and fault.until is not None:
                    time.sleep(max(0.0, fault.until - time.monotonic()))
                resp = route.methods[method](req)
                if fault is not None and fault.status and fault.when == "after":
                    if resp.discard is not None:
                        resp.discard()
                    raise ApiError(fault.status, fault.error)
        except ApiError as err:
            resp = error_response(err)
        except Exception:
            log.exception("internal error on %s %s", method, path)
            resp = json_response({"error": "internal_error"}, 500)
        if req is not None:
            req.drain()
        else:
            self.close_connection = True
        resp.headers.update(cors)
        if fault is not None and fault.delay_ms:
            time.sleep(fault.delay_ms / 1000.0)
        if fault is not None and fault.held_ms:
            svc.faults.hold(fault)
        if fault is not None and fault.reset:
            resp.reset_after = fault.after_bytes
        if fault is not None and fault.rewrite and resp.stream is None:
            for old, new in fault.rewrite:
                resp.body = resp.body.replace(old, new)
        if fault is not None and fault.corrupt and resp.stream is None and resp.status < 300:
            resp.body = fault.corrupt_body(resp.body)
        if svc.latency_ms:
            time.sleep(svc.latency_ms / 1000.0)
        if counted:
            svc.stats.status(route_key, resp.status)
        self._send(resp, method)
        log.debug("%s %s -> %d (%.1f ms)", method, path, resp.status, (time.monotonic() - started) * 1000)

    # --- writing ---
    def _head(self, resp, length):
        reason = self.responses.get(resp.status, ("",))[0]
        lines = ["HTTP/1.1 %d %s" % (resp.status, reason),
                 "date: " + email.utils.formatdate(usegmt=True)]
        for k, v in resp.headers.items():
            lines.append("%s: %s" % (k, v))
        if length is not None and resp.status != 204:
            lines.append("content-length: %d" % length)
        if self.close_connection or length is None:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _reset(self):
        """Abort the connection with a TCP RST."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.wfile.close()
            self.connection.close()
        except OSError:
            pass
        self.wfile = io.BytesIO()      # the base class flushes wfile after the handler

    def _send(self, resp, method):
        try:
            if resp.stream is None:
                body = resp.body if method != "HEAD" else b""
                if resp.reset_after is not None:
                    self.wfile.write(self._head(resp, len(resp.body)) + body[:resp.reset_after])
                    self._reset()
                    return
                self.wfile.write(self._head(resp, len(resp.body)) + body)
                return
            self.close_connection = True
            try:
                self.wfile.write(self._head(resp, None))
            except (OSError, ValueError):
                if resp.discard is not None:
                    resp.discard()
                raise
            budget = [resp.reset_after]

            def write(data):
                if budget[0] is not None:
                    if len(data) >= budget[0]:
                        self.wfile.write(data[:budget[0]])
                        raise _ResetNow()
                    budget[0] -= len(data)
                self.wfile.write(data)
            try:
                resp.stream(write)
            except _ResetNow:
                self._reset()
        except (OSError, ValueError):
            self.close_connection = True


class _ResetNow(Exception):
    pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, addr, service):
        self.service = service
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        super().__init__(addr, Handler)
