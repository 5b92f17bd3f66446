# The service object: wires options, account, stats, faults, auth and the
# route table together; owned by tests/localservice.py.

import hashlib
import hmac
import logging
import re

from . import routes_containers, routes_exec, routes_files, routes_jobs, routes_local
from .account import Account
from .errors import ApiError
from .faults import Faults
from .jobs import JobStores
from .router import Router
from .stats import Stats

log = logging.getLogger("mbsvc")
# worker/app/container-auth.ts: the format check ignores case, the hashed lookup does not.
_BEARER = re.compile(r"Bearer (mb_[a-f0-9]{64})", re.IGNORECASE)


def valid_api_key(key):
    return bool(re.fullmatch(r"mb_[a-f0-9]{64}", key or "", re.IGNORECASE))


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


class Service:
    def __init__(self, opts):
        self.opts = opts
        self.api_key = opts.api_key
        self.key_digest = _digest(opts.api_key)
        self.latency_ms = opts.latency_ms
        self.stats = Stats()
        self.faults = Faults()
        self.account = Account(opts, self.stats)
        self.jobs = JobStores(self, opts)
        self.router = Router()
        for module in (routes_containers, routes_exec, routes_files, routes_jobs, routes_local):
            module.register(self.router, self)

    def authenticate(self, header):
        """401 not_authenticated unless header is 'Bearer <our key>': the token must be
        the key byte for byte (--lenient-auth: any case, any spacing)."""
        if header is not None:
            header = header.strip(" \t")
            if self.opts.lenient_auth:
                scheme, _, token = header.partition(" ")
                if scheme.lower() == "bearer" and token.strip().lower() == self.api_key.lower():
                    return
            else:
                m = _BEARER.fullmatch(header)
                if m and hmac.compare_digest(_digest(m.group(1)), self.key_digest):
                    return
        raise ApiError(401, "not_authenticated")

    def shutdown(self):
        self.jobs.shutdown()
        self.account.shutdown()
