# Managed execution records (§5): the per-slot store (retained across
# generations for an hour, at most 32), admission with Idempotency-Key and
# fingerprint, cancel, and the stdin queue.  Running a job is jobrun.py.

import collections
import hashlib
import json
import threading
import time
import uuid

from . import config
from .errors import ApiError
from .generation import now_ms
from .validate import iso_ms

TERMINAL = ("succeeded", "failed", "timed_out", "output_limit", "canceled", "interrupted")


def fingerprint(spec):
    parts = [["command", spec["command"]] if "command" in spec else ["argv", spec["argv"]],
             spec.get("timeoutMs", config.DEFAULT_TIMEOUT_MS)]
    env = spec.get("env") or {}
    if spec.get("stdin") or spec.get("cwd") is not None or env:
        parts += [bool(spec.get("stdin")), spec.get("cwd"), sorted(env.items())]
    if spec.get("pty"):
        parts.append([spec["pty"]["cols"], spec["pty"]["rows"]])
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


class Job:
    def __init__(self, gen, key, fp, spec, retention_ms):
        self.id = str(uuid.uuid4())
        self.gen = gen
        self.slot = gen.id
        self.created_at = gen.created_at
        self.key = key
        self.fingerprint = fp
        self.spec = spec
        started = now_ms()
        self.started_at = iso_ms(started)
        self.retain_until = started + retention_ms
        self.status = "starting"
        self.cursor = 0
        self.output_bytes = 0
        self.exit_code = None
        self.timed_out = False
        self.output_truncated = False
        self.stdin_enabled = bool(spec.get("stdin"))
        self.stdin_closed = not self.stdin_enabled
        self.stdin_bytes = 0
        self.pty = dict(spec["pty"]) if spec.get("pty") else None
        self.finished_at = None
        self.events = []
        self.cond = threading.Condition()
        self.pid = None
        self.master = None            # PTY master fd
        self.stdin_fd = None          # where stdin bytes go (pipe write end or PTY master)
        self.reason = None            # why we stop it: canceled / timed_out / output_limit
        self.stdin_queue = collections.deque()
        self.stdin_pending = 0

    # --- record ---
    def terminal(self):
        return self.status in TERMINAL

    def summary(self):
        with self.cond:
            doc = {"id": self.id, "createdAt": self.created_at, "startedAt": self.started_at,
                   "status": self.status, "retainUntil": self.retain_until, "cursor": self.cursor,
                   "outputBytes": self.output_bytes, "exitCode": self.exit_code, "timedOut": self.timed_out,
                   "outputTruncated": self.output_truncated, "stdinEnabled": self.stdin_enabled,
                   "stdinClosed": self.stdin_closed, "stdinBytes": self.stdin_bytes}
            if self.pty is not None:
                doc["pty"] = dict(self.pty)
            if self.finished_at is not None:
                doc["finishedAt"] = self.finished_at
            return doc

    def full(self):
        doc = self.summary()
        with self.cond:
            doc["stdout"] = "".join(e["data"] for e in self.events if e["type"] == "stdout")
            doc["stderr"] = "".join(e["data"] for e in self.events if e["type"] == "stderr")
        return doc

    # --- output (called by the pump thread) ---
    def append_event(self, stream, text):
        with self.cond:
            self.cursor += 1
            self.events.append({"type": stream, "data": text, "sequence": self.cursor})
            self.cond.notify_all()

    def event_count(self):
        with self.cond:
            return len(self.events)

    def add_output_bytes(self, n):
        with self.cond:
            self.output_bytes += n

    def events_after(self, cursor):
        """(events with sequence > cursor, terminal?) read atomically."""
        with self.cond:
            return self.events[cursor:], self.terminal()


class JobStore:
    """The records of one slot, across generations."""

    def __init__(self):
        self.lock = threading.Lock()
        self.jobs = {}
        self.streams = 0

    def prune_locked(self):
        now = now_ms()
        for jid in [j.id for j in self.jobs.values() if j.retain_until <= now and j.terminal()]:
            del self.jobs[jid]


class JobStores:
    def __init__(self, svc, opts):
        self.svc = svc
        self.retention_ms = opts.retention_ms or config.RETENTION_MS
        self.stream_ms = opts.stream_ms or config.EXECUTION_STREAM_MS
        self.lock = threading.Lock()
        self.stores = {}

    def store(self, slot):
        with self.lock:
            return self.stores.setdefault(slot, JobStore())

    def find(self, slot, created_at, eid):
        """The job record, or 404 execution_not_found (unknown, other generation, expired)."""
        store = self.store(slot)
        with store.lock:
            job = store.jobs.get(eid)
        if job is None or job.created_at != created_at or job.retain_until <= now_ms():
            raise ApiError(404, "execution_not_found")
        return job

    def list(self, slot, created_at):
        store = self.store(slot)
        now = now_ms()
        with store.lock:
            jobs = [j for j in store.jobs.values() if j.created_at == created_at and j.retain_until > now]
        jobs.sort(key=lambda j: j.id)   # storage-key order, as the real service
        return [j.summary() for j in jobs]

    def create(self, gen, key, spec):
        """Admit a job: (status, summary).  Raises 409/429 per §5.1."""
        from . import jobrun
        fp = fingerprint(spec)
        store = self.store(gen.id)
        with store.lock:
            store.prune_locked()
            for job in store.jobs.values():
                if job.key == key and job.created_at == gen.created_at:
                    if job.fingerprint != fp:
                        raise ApiError(409, "idempotency_key_conflict")
                    return job.summary()
            if not gen.running:
                raise ApiError(409, "container_not_running")
            gen.acquire()
            if len(store.jobs) >= config.MAX_RETAINED_EXECUTIONS:
                gen.release(renew=False)
                raise ApiError(429, "execution_history_limit")
            job = Job(gen, key, fp, spec, self.retention_ms)
            store.jobs[job.id] = job
        self.svc.stats.job_created(gen.id)
        summary = job.summary()
        threading.Thread(target=jobrun.run, args=(job, self.svc.opts), name="job-" + job.id[:8],
                         daemon=True).start()
        return summary

    # --- control ---
    def cancel(self, job, reason="canceled"):
        """Stop a non-terminal job (idempotent)."""
        from . import jobrun
        jobrun.job_stop(job, reason)

    def stdin_write(self, job, data):
        with job.cond:
            if job.status != "running":
                raise ApiError(409, "execution_not_running" if job.stdin_enabled else "stdin_closed")
            if job.stdin_closed:
                raise ApiError(409, "stdin_closed")
            if (job.stdin_bytes + len(data) > config.MAX_STDIN_TOTAL
                    or job.stdin_pending + len(data) > config.MAX_STDIN_PENDING):
                raise ApiError(429, "stdin_limit")
            job.stdin_bytes += len(data)
            job.stdin_pending += len(data)
            item = {"data": data, "done": threading.Event(), "ok": False}
            job.stdin_queue.append(item)
            job.cond.notify_all()
        if not item["done"].wait(config.STDIN_WRITE_MS / 1000.0) or not item["ok"]:
            raise ApiError(503, "stdin_unavailable")
        job.gen.touch()             # the runtime renews idle time after each confirmed write
        return {"bytes": len(data), "stdinClosed": False}

    def stdin_close(self, job):
        with job.cond:
            if job.stdin_closed:
                raise ApiError(409, "stdin_closed")
            job.stdin_closed = True
            job.stdin_queue.append(None)
            job.cond.notify_all()
        job.gen.touch()
        return {"bytes": 0, "stdinClosed": True}

    def shutdown(self):
        with self.lock:
            stores = list(self.stores.values())
        for store in stores:
            with store.lock:
                jobs = list(store.jobs.values())
            for job in jobs:
                self.cancel(job)
        deadline = time.monotonic() + 3
        for store in stores:
            for job in list(store.jobs.values()):
                with job.cond:
                    job.cond.wait_for(job.terminal, max(0.0, deadline - time.monotonic()))
