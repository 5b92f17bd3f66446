# The single error channel of the service: handlers raise ApiError, the HTTP
# layer turns it into {"error": code, ...extra} with the given status.


class ApiError(Exception):
    """An API failure: HTTP status, error code, optional extra JSON fields and headers."""

    def __init__(self, status, code, extra=None, headers=None):
        super().__init__(f"{status} {code}")
        self.status = status
        self.code = code
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self):
        doc = {"error": self.code}
        doc.update(self.extra)
        return doc


class GuestError(Exception):
    """The guest agent is gone or did not answer (the container is dying)."""
