# Routes POST /containers/exec (§3) and GET /containers/export (§6).

from . import config, execrun
from .errors import ApiError, GuestError
from .guestops import agent_call, container_query
from .router import Route
from .server import Response, json_response
from .validate import is_int, valid_command, valid_container_id, valid_generation, wellformed


def register(router, svc):
    account = svc.account

    def exec_query(req):
        container_query(req)

    def post_exec(req):
        doc = req.json_body(config.EXEC_BODY_CAP)
        if not set(doc) <= {"command", "timeoutMs"} or not valid_command(doc.get("command")):
            raise ApiError(400, "invalid_request")
        timeout = doc.get("timeoutMs", config.DEFAULT_TIMEOUT_MS)
        if not is_int(timeout) or not 1 <= timeout <= config.MAX_TIMEOUT_MS:
            raise ApiError(400, "invalid_request")
        gen = account.live(req.query.get("id"), req.query.get("createdAt"))
        svc.stats.command(doc["command"])
        gen.acquire()
        try:
            result = execrun.run(gen, wellformed(doc["command"]), timeout, req.handler.connection, svc.opts)
        except GuestError:
            if not gen.running:
                raise ApiError(409, "container_not_running")
            raise ApiError(503, "execution_unavailable")
        finally:
            gen.release()
        return json_response(result)

    def export_query(req):
        q = req.query
        q.only({"id", "createdAt"}, "invalid_request")
        if not valid_container_id(q.get("id")) or not valid_generation(q.get("createdAt")):
            raise ApiError(400, "invalid_request")

    def get_export(req):
        gen = account.live(req.query.get("id"), req.query.get("createdAt"))
        _, data = agent_call(gen, {"op": "export"}, unavailable="workspace_export_unavailable",
                             timeout=config.EXPORT_TIMEOUT_MS / 1000.0 + 5, renew=False)
        return Response(200, data, {"content-type": "application/gzip",
                                    "content-disposition": 'attachment; filename="workspace.tar.gz"',
                                    "cache-control": "no-store"})

    router.add(Route("/containers/exec", {"POST": post_exec}, exec_query))
    router.add(Route("/containers/export", {"GET": get_export}, export_query))
