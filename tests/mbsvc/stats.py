# Request accounting for GET /_local/stats: per-route request and status
# counts, peak concurrent pool operations and managed jobs created, per container.

import threading


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

    def request(self, route):
        with self.lock:
            self.requests[route] = self.requests.get(route, 0) + 1

    def status(self, route, status):
        with self.lock:
            per = self.statuses.setdefault(route, {})
            per[str(status)] = per.get(str(status), 0) + 1

    def peak(self, cid, ops):
        with self.lock:
            if ops > self.peaks.get(cid, 0):
                self.peaks[cid] = ops

    def job_created(self, cid):
        with self.lock:
            self.jobs[cid] = self.jobs.get(cid, 0) + 1

    def doc(self):
        with self.lock:
            return {"requests": dict(self.requests),
                    "statuses": {k: dict(v) for k, v in self.statuses.items()},
                    "peakConcurrentOps": dict(self.peaks),
                    "jobsCreated": dict(self.jobs)}
