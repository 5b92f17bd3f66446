# Routes /containers/executions[/{eid}[/events|/stdin|/signal|/resize]] (§5):
# request validation, then the job store (jobs.py) and runner (jobrun.py).

import json
import re
import signal
import time

from . import config, jobrun
from .errors import ApiError
from .guestops import container_query
from .router import Route
from .server import Response, json_response
from .validate import is_int, utf8_len, valid_command, valid_idempotency_key, valid_path, wellformed

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SPEC_KEYS = {"command", "argv", "timeoutMs", "stdin", "cwd", "env", "pty"}
_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


def _valid_size(doc):
    return (isinstance(doc, dict) and set(doc) == {"cols", "rows"}
            and all(is_int(doc[k]) and 1 <= doc[k] <= 1000 for k in ("cols", "rows")))


def validate_spec(doc):
    """§5.1 body rules; returns the spec or raises 400 invalid_request."""
    bad = ApiError(400, "invalid_request")
    if not set(doc) <= _SPEC_KEYS or ("command" in doc) == ("argv" in doc):
        raise bad
    if "command" in doc and not valid_command(doc["command"]):
        raise bad
    if "argv" in doc:
        argv = doc["argv"]
        if (not isinstance(argv, list) or not 1 <= len(argv) <= 64
                or not all(isinstance(a, str) and "\0" not in a for a in argv) or argv[0] == ""
                or utf8_len("\0".join(argv)) > config.MAX_COMMAND_BYTES):
            raise bad
    if "timeoutMs" in doc and not (is_int(doc["timeoutMs"]) and 1 <= doc["timeoutMs"] <= config.MAX_MANAGED_TIMEOUT_MS):
        raise bad
    if "stdin" in doc and not isinstance(doc["stdin"], bool):
        raise bad
    if "cwd" in doc and not valid_path(doc["cwd"], allow_root=True):
        raise bad
    if "env" in doc:
        env = doc["env"]
        if (not isinstance(env, dict) or len(env) > 64
                or not all(_ENV_KEY.match(k) and isinstance(v, str) and "\0" not in v and utf8_len(v) <= 4096
                           for k, v in env.items())
                or utf8_len(json.dumps(env, ensure_ascii=False)) > 16384):
            raise bad
    if "pty" in doc and (not _valid_size(doc["pty"]) or doc.get("stdin") is not True):
        raise bad
    spec = dict(doc)
    for key in ("command", "cwd"):
        if key in spec:
            spec[key] = wellformed(spec[key])
    if "argv" in spec:
        spec["argv"] = [wellformed(a) for a in spec["argv"]]
    if "env" in spec:
        spec["env"] = {k: wellformed(v) for k, v in spec["env"].items()}
    return spec


def register(router, svc):
    account, jobs = svc.account, svc.jobs

    def query(req):
        container_query(req)

    def events_query(req):
        container_query(req, ("cursor",))
        cursor = req.query.get("cursor", "0")
        if not re.match(r"^\d+$", cursor) or int(cursor) > 2 ** 53 - 1:
            raise ApiError(400, "invalid_cursor")

    def ids(req):
        return req.query.get("id"), req.query.get("createdAt")

    def find(req):
        cid, created = ids(req)
        return jobs.find(cid, created, req.params["eid"])

    def create(req):
        key = req.header("Idempotency-Key")
        if not valid_idempotency_key(key):
            raise ApiError(400, "invalid_idempotency_key")
        spec = validate_spec(req.json_body(config.EXEC_BODY_CAP))
        gen = account.live(*ids(req))
        return json_response(jobs.create(gen, key, spec), 202)

    def list_jobs(req):
        return json_response({"executions": jobs.list(*ids(req))})

    def get_job(req):
        return json_response(find(req).full())

    def cancel(req):
        job = find(req)
        before = job.summary()
        jobs.cancel(job)
        return json_response(before, 202)

    def events(req):
        job = find(req)
        cursor = int(req.query.get("cursor", "0"))
        if cursor > job.cursor:
            raise ApiError(400, "invalid_cursor")
        store = jobs.store(job.slot)
        with store.lock:
            if store.streams >= config.MAX_EXECUTION_STREAMS:
                raise ApiError(429, "execution_stream_limit")
            store.streams += 1
        resp = Response(200, headers={"content-type": "text/event-stream", "cache-control": "no-store",
                                      "x-content-type-options": "nosniff"},
                        stream=lambda write: _stream(job, cursor, store, write, jobs.stream_ms))
        resp.discard = lambda: _release(store)
        return resp

    def stdin_post(req):
        data = req.body(config.MAX_STDIN_CHUNK, "stdin_too_large")
        account.live(*ids(req))
        return json_response(jobs.stdin_write(find(req), data))

    def stdin_delete(req):
        return json_response(jobs.stdin_close(find(req)))

    def post_signal(req):
        doc = req.json_body(config.EXEC_BODY_CAP)
        if set(doc) != {"signal"} or doc["signal"] not in _SIGNALS:
            raise ApiError(400, "invalid_request")
        job = find(req)
        summary = job.summary()
        if summary["status"] != "running":
            raise ApiError(409, "execution_not_running")
        if doc["signal"] == "SIGKILL":
            jobs.cancel(job)
        elif not job.gen.guest.kill(job.pid, _SIGNALS[doc["signal"]]):
            raise ApiError(409, "execution_not_running")
        return json_response(summary, 202)

    def resize(req):
        doc = req.json_body(config.EXEC_BODY_CAP)
        if not _valid_size(doc):
            raise ApiError(400, "invalid_request")
        account.live(*ids(req))
        job = find(req)
        with job.cond:
            if job.pty is None or job.status != "running" or job.master is None:
                raise ApiError(409, "pty_unavailable")
            try:
                jobrun.set_winsize(job.master, doc["cols"], doc["rows"])
            except OSError:
                raise ApiError(409, "pty_unavailable")
            job.pty = {"cols": doc["cols"], "rows": doc["rows"]}
        return json_response(job.summary())

    base = "/containers/executions"
    router.add(Route(base, {"POST": create, "GET": list_jobs}, query))
    router.add(Route(base + "/{eid}", {"GET": get_job, "DELETE": cancel}, query))
    router.add(Route(base + "/{eid}/events", {"GET": events}, events_query))
    router.add(Route(base + "/{eid}/stdin", {"POST": stdin_post, "DELETE": stdin_delete}, query))
    router.add(Route(base + "/{eid}/signal", {"POST": post_signal}, query))
    router.add(Route(base + "/{eid}/resize", {"POST": resize}, query))


def _frame(event):
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return ("id: %d\nevent: %s\ndata: %s\n\n" % (event["sequence"], event["type"], data)).encode("utf-8")


def _stream(job, cursor, store, write, stream_ms):
    """§5.4 server loop: events above cursor, status frame at the end or after stream_ms."""
    deadline = time.monotonic() + stream_ms / 1000.0
    try:
        while True:
            with job.cond:
                events, terminal = job.events_after(cursor)
                final = terminal or time.monotonic() >= deadline
                summary = job.summary() if final else None
            if events:
                write(b"".join(_frame(e) for e in events))
                cursor = events[-1]["sequence"]
            if final:
                status = json.dumps(summary, separators=(",", ":"), ensure_ascii=False)
                write(("event: status\ndata: %s\n\n" % status).encode("utf-8"))
                return
            with job.cond:
                job.cond.wait_for(lambda: job.cursor > cursor or job.terminal(),
                                  min(1.0, max(0.0, deadline - time.monotonic())))
            write(b": heartbeat\n\n")
    finally:
        _release(store)


def _release(store):
    with store.lock:
        store.streams -= 1
