# Local-only routes under /_local/ (same bearer auth): stats (with the live
# zombie count of each running guest), fault injection rules and forced lease
# expiry.  Not part of the hosted API.

from .errors import ApiError
from .faults import parse
from .router import Route
from .server import json_response
from .validate import valid_container_id


def register(router, svc):
    def get_stats(req):
        doc = svc.stats.doc(commands=req.query.get("commands") == "1")
        doc["zombies"] = {}
        doc["guestCpuMs"] = {}
        for gen in svc.account.running():
            u = gen.guest.usage() if gen.guest is not None else None
            if u is not None:
                doc["zombies"][gen.id] = u[0]
                if u[1] is not None:
                    doc["guestCpuMs"][gen.id] = u[1]
        return json_response(doc)

    def reset_stats(req):
        svc.stats.reset()
        return json_response({"ok": True})

    def add_fault(req):
        svc.faults.add(parse(req.json_body(65536)))
        return json_response({"ok": True})

    def get_faults(req):
        return json_response({"held": svc.faults.holding})

    def clear_faults(req):
        svc.faults.clear()
        return json_response({"ok": True})

    def release_held(req):
        svc.faults.release()
        return json_response({"ok": True})

    def expire(req):
        q = req.query
        q.only({"id", "createdAt"}, "invalid_request")
        if not valid_container_id(q.get("id")) or not q.get("createdAt"):
            raise ApiError(400, "invalid_request")
        svc.account.expire(q.get("id"), q.get("createdAt"))
        return json_response({"ok": True})

    router.add(Route("/_local/stats", {"GET": get_stats, "DELETE": reset_stats}))
    router.add(Route("/_local/faults", {"GET": get_faults, "POST": add_fault, "DELETE": clear_faults}))
    router.add(Route("/_local/faults/release", {"POST": release_held}))
    router.add(Route("/_local/expire", {"POST": expire}))
