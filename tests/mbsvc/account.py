# The account: slots and their generations, container creation with the 24 h
# Idempotency-Key records, deletion, lease expiry (hard and idle deadlines),
# start counting and the GET /containers status document.

import logging
import os
import shutil
import threading
import time
import uuid

from . import config
from .errors import ApiError, GuestError
from .generation import Generation, now_ms
from .guest import Guest, GuestSpec
from .validate import iso_ms, slot_index

log = logging.getLogger("mbsvc.account")


class Reservation:
    """A slot reserved by a POST /containers whose boot is still running."""

    def __init__(self, index, size, catalog, internet):
        self.index = index
        self.reserved_ms = now_ms()
        self.size = size
        self.catalog = catalog
        self.internet = internet


class Creation:
    def __init__(self, key, fingerprint, index):
        self.id = str(uuid.uuid4())
        self.key = key
        self.fingerprint = fingerprint
        self.index = index
        self.made_ms = now_ms()
        self.reserved_at = iso_ms(self.made_ms)
        self.gen = None
        self.failed = False


class Account:
    def __init__(self, opts, stats):
        self.plan = opts.plan
        self.limits = dict(config.PLANS[opts.plan])
        self.idle_ms = opts.idle_timeout_ms or self.limits["idleTimeoutMs"]
        # GET /containers reports what is applied (a mount's keepalive reads it)
        self.limits["idleTimeoutMs"] = self.idle_ms
        self.state_dir = opts.state
        self.isolated = opts.isolated
        self.opts = opts
        self.job_renew_ms = opts.job_renew_ms or config.JOB_RENEW_MS
        if opts.lenient_idle and not opts.job_renew_ms:
            self.job_renew_ms = min(config.JOB_RENEW_MS, self.idle_ms / 3.0)
        self.stats = stats
        self.lock = threading.Lock()
        self.slots = {}          # index -> Generation | Reservation
        self.last_gen = {}       # index -> last generation ms
        self.creations = {}      # key -> Creation
        self.starts = 0
        self.used_cuh = 0.0      # compute-unit hours of stopped generations
        self.stop_listeners = []  # fn(gen) called after a generation stops
        self.closed = False
        self._ticker = threading.Thread(target=self._tick, name="deadlines", daemon=True)
        self._ticker.start()

    # --- lookups ---
    def live(self, cid, created_at):
        """The running generation (cid, created_at), or 409 container_not_running."""
        with self.lock:
            gen = self.slots.get(slot_index(cid))
        if not isinstance(gen, Generation) or gen.created_at != created_at or not gen.running:
            raise ApiError(409, "container_not_running")
        if gen.expired():
            self.stop(gen, "expired")
            raise ApiError(409, "container_not_running")
        return gen

    def running(self):
        with self.lock:
            return [g for g in self.slots.values() if isinstance(g, Generation)]

    # --- status document ---
    def _usage_locked(self):
        now = now_ms()
        used, reserved, cu = self.used_cuh, 0.0, 0
        for g in self.slots.values():
            units = config.SIZES[g.size]["computeUnits"]
            cu += units
            if isinstance(g, Generation):
                used += units * (now - g.created_ms) / 3600000.0
            reserved += units * self.limits["maxSessionMs"] / 3600000.0
        return used, reserved, cu

    def doc(self):
        with self.lock:
            used, reserved, cu = self._usage_locked()
            items = []
            for g in self.slots.values():
                if isinstance(g, Generation):
                    items.append(g.doc())
                elif now_ms() - g.reserved_ms < config.STARTING_VISIBLE_MS:
                    res = config.SIZES[g.size]
                    items.append({"id": "small" if g.index == 0 else "c%d" % g.index,
                                  "name": "Small container" if g.index == 0 else "Small container %d" % (g.index + 1),
                                  "size": g.size, "instance": res["instance"], "computeUnits": res["computeUnits"],
                                  "status": "starting", "internet": g.internet, "catalogId": g.catalog,
                                  "createdAt": iso_ms(g.reserved_ms),
                                  "expiresAt": iso_ms(g.reserved_ms + self.limits["maxSessionMs"])})
            starts = self.starts
        items.sort(key=lambda c: (c["createdAt"], c["id"]))
        maxcuh = self.limits["maxComputeUnitHours"]
        return {"billing": None, "sizes": [dict(r) for r in config.RESOURCES], "plan": self.plan, "active": True,
                "limits": dict(self.limits),
                "usage": {"month": time.strftime("%Y-%m", time.gmtime()), "starts": starts,
                          "computeUnitHours": round(used, 3), "reservedComputeUnitHours": round(reserved, 3),
                          "availableComputeUnitHours": round(max(0.0, maxcuh - used - reserved), 3),
                          "concurrentComputeUnits": cu},
                "containers": items,
                "imageCatalog": [dict(c) for c in config.IMAGE_CATALOG]}

    # --- create ---
    def create(self, size, catalog, internet, key):
        fingerprint = [catalog, None, size, internet is False]
        with self.lock:
            self._prune_creations_locked()
            rec = self.creations.get(key) if key else None
            replay = self._replay_locked(rec, fingerprint) if rec is not None else None
            if replay is None:
                res, rec, created = self._reserve_locked(size, catalog, internet, key, fingerprint)
        if replay is not None:
            doc = self.doc()
            doc["creation"] = replay
            return doc
        return self._start(res, rec, created)

    def _reserve_locked(self, size, catalog, internet, key, fingerprint):
        """Capacity and quota checks (§2.3 order), then reserve the lowest free slot."""
        units = config.SIZES[size]["computeUnits"]
        used, reserved, cu = self._usage_locked()
        if cu + units > self.limits["maxConcurrentComputeUnits"]:
            raise ApiError(409, "compute_capacity_exceeded")
        if len(self.slots) >= self.limits["maxContainers"]:
            raise ApiError(409, "container_limit_exceeded")
        if self.starts >= self.limits["maxStartsPerMonth"]:
            raise ApiError(429, "container_quota_exceeded")
        hours = units * self.limits["maxSessionMs"] / 3600000.0
        if used + reserved + hours > self.limits["maxComputeUnitHours"]:
            raise ApiError(429, "compute_allowance_exhausted")
        index = next(i for i in range(self.limits["maxContainers"]) if i not in self.slots)
        res = Reservation(index, size, catalog, internet)
        self.slots[index] = res
        self.starts += 1
        rec = None
        if key:
            rec = self.creations[key] = Creation(key, fingerprint, index)
        created = max(now_ms(), self.last_gen.get(index, 0) + 1)
        self.last_gen[index] = created
        return res, rec, created

    def _start(self, res, rec, created):
        index = res.index
        try:
            gen = self._boot(res, created)
        except Exception:
            # a reservation left behind would answer "starting" forever
            log.exception("boot of slot %d failed", index)
            gen = None
        with self.lock:
            if gen is None or self.slots.get(index) is not res:
                if self.slots.get(index) is res:
                    del self.slots[index]
                if rec:
                    rec.failed = True
                if gen is not None:
                    gen.running = False
                    threading.Thread(target=self._teardown, args=(gen,), daemon=True).start()
                raise ApiError(503, "containers_unavailable")
            self.slots[index] = gen
            if rec:
                rec.gen = gen
        log.info("started %s generation %s", gen.id, gen.created_at)
        doc = self.doc()
        if rec:
            doc["creation"] = {"id": rec.id, "containerId": gen.id, "createdAt": gen.created_at,
                               "status": "running"}
        return doc

    def _replay_locked(self, rec, fingerprint):
        if rec.fingerprint != fingerprint:
            raise ApiError(409, "idempotency_key_conflict")
        cid = "small" if rec.index == 0 else "c%d" % rec.index
        current = self.slots.get(rec.index)
        if rec.gen is None and not rec.failed and isinstance(current, Reservation):
            creation = {"id": rec.id, "containerId": cid, "createdAt": rec.reserved_at, "status": "starting"}
        elif rec.gen is not None and current is rec.gen and rec.gen.running:
            creation = {"id": rec.id, "containerId": cid, "createdAt": rec.gen.created_at, "status": "running"}
        else:
            raise ApiError(409, "creation_no_longer_running",
                           {"creation": {"id": rec.id, "containerId": cid, "status": "stopped"}})
        return creation

    def _boot(self, res, created):
        root = os.path.join(self.state_dir, "slots", "small" if res.index == 0 else "c%d" % res.index,
                            iso_ms(created).replace(":", ""))
        gen = Generation(res.index, created, self.limits, res.size, res.catalog, res.internet, root,
                         self.idle_ms, self.stats, renew_at_end=self.opts.lenient_idle,
                         job_renew_ms=self.job_renew_ms)
        spec = GuestSpec(workdir=config.IMAGE_WORKDIR[res.catalog], guest_uid=self.opts.guest_uid,
                         uid_base=config.UID_BASE + res.index * config.UID_RANGE,
                         reaping_init=self.opts.reaping_init,
                         size=config.SIZES[res.size] if getattr(self.opts, "enforce_sizes", False) else None)
        gen.guest = Guest(root, self.isolated, res.internet, spec)
        try:
            gen.guest.start(config.BOOT_TIMEOUT_MS / 1000.0)
            r, w = os.pipe()
            try:
                pid = gen.guest.spawn(["/bin/sh", "-lc", "uname -a"], {"PATH": config.GUEST_PATH}, [r, w, w])
            finally:
                os.close(r)
                os.close(w)
            status = gen.guest.wait(pid, timeout=config.BOOT_TIMEOUT_MS / 1000.0)
            if status != 0:
                raise GuestError("readiness check exited with status %d" % status)
        except (GuestError, OSError) as e:
            log.error("boot of %s failed: %s", gen.id, e)
            gen.running = False
            self._teardown(gen)
            return None
        return gen

    def _prune_creations_locked(self):
        cutoff = now_ms() - config.IDEMPOTENCY_MS
        for k in [k for k, r in self.creations.items() if r.made_ms < cutoff]:
            del self.creations[k]

    # --- delete / stop ---
    def delete(self, cid, created_at):
        with self.lock:
            gens = [g for g in self.slots.values() if isinstance(g, Generation)]
            if cid is None:
                if len(gens) > 1:
                    raise ApiError(400, "container_id_required")
                target = gens[0] if gens else None
            else:
                target = self.slots.get(slot_index(cid))
                if not isinstance(target, Generation):
                    raise ApiError(409, "container_not_running")
        if target is not None:
            if created_at is not None and created_at != target.created_at:
                raise ApiError(409, "container_not_running")
            if not self.stop(target, "deleted"):
                raise ApiError(409, "container_not_running")
        return self.doc()

    def expire(self, cid, created_at):
        with self.lock:
            gen = self.slots.get(slot_index(cid))
        if not isinstance(gen, Generation) or gen.created_at != created_at:
            raise ApiError(409, "container_not_running")
        self.stop(gen, "expired")

    def stop(self, gen, reason):
        """End a generation: cancel its jobs, kill its processes.  False if already stopped."""
        with self.lock:
            if self.slots.get(gen.index) is not gen:
                return False
            del self.slots[gen.index]
            units = config.SIZES[gen.size]["computeUnits"]
            self.used_cuh += units * (now_ms() - gen.created_ms) / 3600000.0
        with gen.lock:
            gen.running = False
            hooks, gen.stop_hooks = gen.stop_hooks, []
        log.info("stopping %s generation %s (%s)", gen.id, gen.created_at, reason)
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("stop hook failed")
        self._teardown(gen)
        return True

    def _teardown(self, gen):
        if gen.guest is not None:
            gen.guest.stop()
        shutil.rmtree(gen.root, ignore_errors=True)

    def _tick(self):
        while not self.closed:
            time.sleep(0.2)
            for gen in self.running():
                if gen.expired():
                    self.stop(gen, "lease expired")

    def shutdown(self):
        self.closed = True
        for gen in self.running():
            self.stop(gen, "service exit")
