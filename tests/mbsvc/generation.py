# One container generation: its guest, deadlines (hard and idle) and the
# shared pool of 4 concurrent operations (exec, files, metadata, export and
# running managed jobs).  Stopping is owned by Account; this holds state only.
# Idle renewal follows the hosted runtime: once when a call's process starts,
# never at its end, and every job_renew_ms while a managed job runs.

import threading
import time

from . import config
from .errors import ApiError
from .validate import iso_ms, slot_name


def now_ms():
    return int(time.time() * 1000)


class Generation:
    def __init__(self, index, created_ms, limits, size, catalog, internet, root, idle_ms, stats,
                 renew_at_end=False, job_renew_ms=config.JOB_RENEW_MS):
        self.index = index
        self.id = slot_name(index)
        self.created_ms = created_ms
        self.created_at = iso_ms(created_ms)
        self.expires_ms = created_ms + limits["maxSessionMs"]
        self.idle_timeout_ms = idle_ms
        self.idle_deadline_ms = created_ms + idle_ms
        self.renew_at_end = renew_at_end          # --lenient-idle: calls renew again when they end
        self.job_renew_ms = job_renew_ms
        self.size = size
        self.catalog = catalog
        self.internet = internet
        self.root = root
        self.guest = None
        self.stats = stats
        self.lock = threading.Lock()
        self.ops = 0
        self.running = True
        self.stop_hooks = []      # callables run (once) when the generation stops

    # --- deadlines ---
    def expired(self, at=None):
        at = now_ms() if at is None else at
        return at >= self.expires_ms or at >= self.idle_deadline_ms

    def touch(self):
        """Renew the idle deadline; False when the generation is already stopped or past a deadline."""
        with self.lock:
            if not self.running or self.expired():
                return False
            self.idle_deadline_ms = min(now_ms() + self.idle_timeout_ms, self.expires_ms)
            return True

    def remaining_ms(self):
        return self.expires_ms - now_ms()

    # --- the pool of 4 ---
    def acquire(self, renew=True):
        with self.lock:
            if not self.running or self.expired():
                raise ApiError(409, "container_not_running")
            if self.ops >= config.MAX_CONCURRENT_OPS:
                raise ApiError(429, "execution_limit")
            self.ops += 1
            ops = self.ops
        self.stats.peak(self.id, ops)
        if renew:
            self.touch()

    def release(self, renew=True):
        with self.lock:
            self.ops -= 1
        if renew and self.renew_at_end:
            self.touch()

    def add_stop_hook(self, fn):
        """Register fn to run at stop; returns False when already stopped."""
        with self.lock:
            if not self.running:
                return False
            self.stop_hooks.append(fn)
            return True

    def remove_stop_hook(self, fn):
        with self.lock:
            if fn in self.stop_hooks:
                self.stop_hooks.remove(fn)

    def doc(self):
        res = config.SIZES[self.size]
        catalog = next(c for c in config.IMAGE_CATALOG if c["id"] == self.catalog)
        return {"id": self.id,
                "name": "Small container" if self.index == 0 else "Small container %d" % (self.index + 1),
                "size": self.size, "instance": res["instance"], "computeUnits": res["computeUnits"],
                "status": "running", "internet": self.internet, "catalogId": self.catalog,
                "imageName": catalog["name"], "imageDigest": "sha256:local-" + self.catalog,
                "createdAt": self.created_at, "expiresAt": iso_ms(self.expires_ms)}
