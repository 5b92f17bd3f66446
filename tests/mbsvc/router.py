# Route table: path patterns with {eid} placeholders, per-method handlers,
# a query validator run before auth, and whether the route needs a bearer key.

import re

from .validate import valid_execution_id


class Route:
    def __init__(self, pattern, methods, query=None, auth=True):
        self.pattern = pattern
        self.methods = methods          # {"GET": fn(req) -> Response}
        self.query = query              # fn(req) raising ApiError, run before auth
        self.auth = auth
        self.regex = re.compile("^" + re.escape(pattern).replace(r"\{eid\}", "([^/]+)") + "$")


class Router:
    def __init__(self):
        self.routes = []

    def add(self, route):
        self.routes.append(route)

    def match(self, path):
        """(route, params) or None.  A malformed execution id does not match (404 not_found)."""
        for route in self.routes:
            m = route.regex.match(path)
            if m:
                params = {}
                if m.groups():
                    eid = m.group(1)
                    if not valid_execution_id(eid):
                        return None
                    params["eid"] = eid
                return route, params
        return None
