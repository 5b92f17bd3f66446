# The service object: wires options, account, stats, faults, auth and the
# route table together; owned by tests/localservice.py.

import logging

from . import routes_containers, routes_exec, routes_files, routes_jobs, routes_local
from .account import Account
from .errors import ApiError
from .faults import Faults
from .jobs import JobStores
from .router import Router
from .stats import Stats

log = logging.getLogger("mbsvc")


class Service:
    def __init__(self, opts):
        self.opts = opts
        self.api_key = opts.api_key
        self.latency_ms = opts.latency_ms
        self.stats = Stats()
        self.faults = Faults()
        self.account = Account(opts, self.stats)
        self.jobs = JobStores(self, opts)
        self.router = Router()
        for module in (routes_containers, routes_exec, routes_files, routes_jobs, routes_local):
            module.register(self.router, self)

    def authenticate(self, header):
        """401 not_authenticated unless header is 'Bearer <our key>' (scheme and hex case-insensitive)."""
        if header:
            scheme, _, token = header.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip().lower() == self.api_key.lower():
                return
        raise ApiError(401, "not_authenticated")

    def shutdown(self):
        self.jobs.shutdown()
        self.account.shutdown()
