# Request accounting for GET /_local/stats: per-route request and status
# counts, peak concurrent pool operations and managed jobs created, per container,
# and the heads of the exec commands run (tests tell guest listings from
# archives and batches by them).

import threading

COMMAND_HEAD = 4096    # characters of each exec command kept
COMMANDS_KEPT = 4000   # the first ones since the last reset


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = {}
            self.statuses = {}
            self.peaks = {}
            self.jobs = {}
            self.commands = []

    def request(self, route):
        with self.lock:
            self.requests[route] = self.requests.get(route, 0) + 1

    def status(self, route, status):
        with self.lock:
            per = self.statuses.setdefault(route, {})
            per[str(status)] = per.get(str(status), 0) + 1

    def command(self, text):
        with self.lock:
            if len(self.commands) < COMMANDS_KEPT:
                self.commands.append(text[:COMMAND_HEAD])

    def peak(self, cid, ops):
        with self.lock:
            if ops > self.peaks.get(cid, 0):
                self.peaks[cid] = ops

    def job_created(self, cid):
        with self.lock:
            self.jobs[cid] = self.jobs.get(cid, 0) + 1

    def doc(self, commands=False):
        with self.lock:
            doc = {"requests": dict(self.requests),
                   "statuses": {k: dict(v) for k, v in self.statuses.items()},
                   "peakConcurrentOps": dict(self.peaks),
                   "jobsCreated": dict(self.jobs)}
            if commands:
                doc["execCommands"] = list(self.commands)
            return doc
