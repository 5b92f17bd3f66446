# Helpers shared by the guest-facing routes: the common id/createdAt query
# check, the guest environment, and one pooled call into the guest agent
# with its error mapping (agent code -> HTTP status).

from . import config
from .errors import ApiError, GuestError
from .validate import valid_container_id, valid_generation

AGENT_STATUS = {
    "file_not_found": 404, "not_regular_file": 409, "file_access_denied": 403, "file_too_large": 413,
    "not_directory": 409, "file_exists": 409, "directory_not_empty": 409, "symlink_not_allowed": 409,
    "unsupported_file_name": 409, "directory_too_large": 413,
    "workspace_export_too_large": 413, "workspace_export_unavailable": 503,
}


def container_query(req, extra=(), unknown_code="invalid_container_id"):
    """Validate id and createdAt (+ extra keys); returns (id, createdAt)."""
    q = req.query
    q.only({"id", "createdAt", *extra}, unknown_code)
    cid, created = q.get("id"), q.get("createdAt")
    if not cid or not valid_container_id(cid):
        raise ApiError(400, "invalid_container_id")
    if not valid_generation(created):
        raise ApiError(400, "invalid_generation")
    return cid, created


def guest_env(gen, extra=None):
    """The environment of guest processes: PATH and the image user's HOME (degraded: /workspace)."""
    guest = gen.guest
    env = {"PATH": config.GUEST_PATH, "HOME": guest.spec.home if guest.isolated else "/workspace"}
    env.update(extra or {})
    return env


def agent_call(gen, header, payload=b"", unavailable="files_unavailable",
               timeout=config.FILES_TIMEOUT_MS / 1000.0, renew=True):
    """Run one agent operation holding a pool slot; returns (result, payload).
    renew: the call renews the idle deadline as it starts (export does not)."""
    gen.acquire(renew)
    try:
        res, out = gen.guest.call(header, payload, timeout=timeout)
    except GuestError:
        if not gen.running:
            raise ApiError(409, "container_not_running")
        raise ApiError(503, unavailable)
    finally:
        gen.release(renew)
    if not res.get("_ok"):
        code = res.get("error")
        status = AGENT_STATUS.get(code)
        if status is None:
            raise ApiError(503, unavailable)
        raise ApiError(status, code)
    return res["result"], out
