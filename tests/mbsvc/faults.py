# One-shot fault rules for /_local/faults, consumed in order by matching
# requests: fail (before or after performing), reset mid-body, delay, hold
# the answer until the test releases it, or rewrite the body of the answer,
# or corrupt the body of a success (one bit flipped, or cut short).

import threading
import time

from .errors import ApiError


class Fault:
    def __init__(self, doc):
        self.route = doc["route"]
        self.count = doc["count"]
        self.match = doc.get("match")
        self.status = doc.get("status")
        self.error = doc.get("error")
        self.when = doc.get("when", "before")
        self.reset = bool(doc.get("reset"))
        self.after_bytes = doc.get("afterBytes", 0)
        self.delay_ms = doc.get("delayMs", 0)
        # heldMs: the answer waits, performed, until /_local/faults/release
        # (or a clear), at most heldMs: a test waits on its own event, not
        # on a time that a busy machine may outlast
        self.held_ms = doc.get("heldMs", 0)
        self.released = None
        self.rewrite = [(a.encode(), b.encode()) for a, b in doc.get("rewrite", [])]
        self.corrupt = doc.get("corrupt")
        self.at_byte = doc.get("atByte", 0)
        # holdMs: a stall; matching requests wait, unperformed, until it ends
        self.until = time.monotonic() + doc["holdMs"] / 1000.0 if "holdMs" in doc else None

    def corrupt_body(self, body):
        """body with the low bit of byte atByte flipped ("flip") or cut
        there ("truncate"); a negative atByte counts from the end."""
        if not body:
            return body
        k = self.at_byte if self.at_byte >= 0 else len(body) + self.at_byte
        k = max(0, min(k, len(body) - 1))
        if self.corrupt == "flip":
            return body[:k] + bytes([body[k] ^ 1]) + body[k + 1:]
        return body[:k]


def parse(doc):
    """Validate a rule document; raise ApiError(400, invalid_request) when malformed."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)
    known = {"route", "count", "match", "status", "error", "when", "reset", "afterBytes", "delayMs",
             "rewrite", "corrupt", "atByte", "holdMs", "heldMs"}
    ok = (isinstance(doc, dict) and set(doc) <= known and isinstance(doc.get("route"), str)
          and is_int(doc.get("count")) and doc["count"] >= 1
          and isinstance(doc.get("match", ""), str))
    if ok and doc.get("reset"):
        ok = doc["reset"] is True and is_int(doc.get("afterBytes", 0)) and doc.get("afterBytes", 0) >= 0
    elif ok and "rewrite" in doc:
        pairs = doc["rewrite"]
        ok = isinstance(pairs, list) and pairs != [] and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) and p[0]
            for p in pairs)
    elif ok and "corrupt" in doc:
        ok = doc["corrupt"] in ("flip", "truncate") and is_int(doc.get("atByte", 0))
    elif ok and "holdMs" in doc:
        ok = is_int(doc["holdMs"]) and doc["holdMs"] >= 0
    elif ok and "heldMs" in doc:
        ok = is_int(doc["heldMs"]) and doc["heldMs"] >= 0
    elif ok and "delayMs" in doc:
        ok = is_int(doc["delayMs"]) and doc["delayMs"] >= 0
    elif ok:
        ok = (is_int(doc.get("status")) and 400 <= doc["status"] <= 599 and isinstance(doc.get("error"), str)
              and doc.get("when", "before") in ("before", "after"))
    if not ok:
        raise ApiError(400, "invalid_request")
    return Fault(doc)


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.released = threading.Event()
        self.holding = 0        # answers held now (heldMs)

    def add(self, fault):
        with self.lock:
            self.rules.append(fault)

    def clear(self):
        with self.lock:
            self.rules = []
        self.release()

    def hold(self, fault):
        """Hold this answer until released, or for fault.held_ms."""
        with self.lock:
            self.holding += 1
        try:
            fault.released.wait(fault.held_ms / 1000.0)
        finally:
            with self.lock:
                self.holding -= 1

    def release(self):
        """Let every answer held until now go (heldMs)."""
        with self.lock:
            done, self.released = self.released, threading.Event()
        done.set()

    def take(self, route, target):
        """Consume and return the first rule matching route and target (path+query), or None."""
        with self.lock:
            now = time.monotonic()
            self.rules = [r for r in self.rules if r.until is None or r.until > now]
            for rule in self.rules:
                if rule.route == route and (not rule.match or rule.match in target):
                    rule.released = self.released
                    rule.count -= 1
                    if rule.count <= 0:
                        self.rules.remove(rule)
                    return rule
        return None
