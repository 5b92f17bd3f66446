# Routes GET/PUT /containers/files (§4.2, §4.3) and the metadata routes
# /containers/files/{list,stat,mkdir,remove,move,chmod} (§4.4-4.6).
# Validation happens here; the operations themselves run in the guest agent.

import re

from . import config
from .errors import ApiError
from .guestops import agent_call, container_query
from .router import Route
from .server import Response, json_response
from .validate import valid_mode, valid_path

_INT = re.compile(r"^\d+$")
_EXTRA = {"list": ("path", "limit", "offset"), "stat": ("path", "followSymlinks"),
          "remove": ("path", "recursive"), "chmod": ("path",), "mkdir": (), "move": ()}


def _clean(path):
    """Metadata paths must round-trip through UTF-8 (no U+FFFD from bad bytes, no surrogates)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _meta_path(value, allow_root=False):
    if not isinstance(value, str) or not _clean(value) or not valid_path(value, allow_root):
        raise ApiError(400, "invalid_request")
    return value


def _query_int(req, name, default, lo, hi):
    text = req.query.get(name)
    if text is None:
        return default
    if not _INT.match(text) or not lo <= int(text) <= hi:
        raise ApiError(400, "invalid_request")
    return int(text)


def _query_bool(req, name):
    text = req.query.get(name)
    if text is None:
        return False
    if text not in ("true", "false"):
        raise ApiError(400, "invalid_request")
    return text == "true"


def _query_path(req, allow_root=False):
    if not req.query.clean.get("path", True):
        raise ApiError(400, "invalid_request")
    return _meta_path(req.query.get("path"), allow_root)


def _body(req, allowed, required):
    doc = req.json_body(config.FS_BODY_CAP)
    if not set(doc) <= set(allowed) or not set(required) <= set(doc):
        raise ApiError(400, "invalid_request")
    return doc


def register(router, svc):
    account = svc.account

    def files_query(req):
        container_query(req, ("path",))
        if not valid_path(req.query.get("path")):
            raise ApiError(400, "invalid_file_path")

    def get_file(req):
        q = req.query
        gen = account.live(q.get("id"), q.get("createdAt"))
        _, data = agent_call(gen, {"op": "read", "path": q.get("path")})
        return Response(200, data, {"content-type": "application/octet-stream",
                                    "content-disposition": "attachment", "cache-control": "no-store",
                                    "x-content-type-options": "nosniff"})

    def put_file(req):
        q = req.query
        data = req.body(config.MAX_FILE_BYTES, "file_too_large")
        gen = account.live(q.get("id"), q.get("createdAt"))
        agent_call(gen, {"op": "write", "path": q.get("path")}, data)
        return json_response({"path": q.get("path"), "size": len(data)})

    router.add(Route("/containers/files", {"GET": get_file, "PUT": put_file}, files_query))

    def meta(op, method, build):
        def query(req):
            container_query(req, _EXTRA[op], "invalid_request")

        def handler(req):
            header = build(req)
            header["op"] = op
            gen = account.live(req.query.get("id"), req.query.get("createdAt"))
            res, _ = agent_call(gen, header)
            return json_response(res)
        router.add(Route("/containers/files/" + op, {method: handler}, query))

    def build_list(req):
        path = _query_path(req, allow_root=True)
        limit = _query_int(req, "limit", config.DEFAULT_LIST_LIMIT, 1, config.MAX_DIR_ENTRIES)
        offset = _query_int(req, "offset", 0, 0, config.MAX_DIR_OFFSET)
        doc = {"path": path, "limit": limit, "offset": offset}
        if svc.opts.lenient_listing:
            doc["lenient"] = True
        return doc

    def build_stat(req):
        path = _query_path(req, allow_root=True)
        return {"path": path, "followSymlinks": _query_bool(req, "followSymlinks")}

    def build_remove(req):
        path = _query_path(req)
        return {"path": path, "recursive": _query_bool(req, "recursive")}

    def build_mkdir(req):
        doc = _body(req, ("path", "recursive", "mode"), ("path",))
        path = _meta_path(doc["path"])
        recursive = doc.get("recursive", False)
        mode = doc.get("mode", "0700")
        if not isinstance(recursive, bool) or not valid_mode(mode):
            raise ApiError(400, "invalid_request")
        return {"path": path, "recursive": recursive, "mode": mode}

    def build_move(req):
        doc = _body(req, ("path", "destination"), ("path", "destination"))
        src, dst = _meta_path(doc["path"]), _meta_path(doc["destination"])
        if dst == src or dst.startswith(src + "/"):
            raise ApiError(400, "invalid_request")
        return {"path": src, "destination": dst}

    def build_chmod(req):
        doc = _body(req, ("mode",), ("mode",))
        path = _query_path(req)
        if not valid_mode(doc["mode"]):
            raise ApiError(400, "invalid_request")
        return {"path": path, "mode": doc["mode"]}

    meta("list", "GET", build_list)
    meta("stat", "GET", build_stat)
    meta("mkdir", "POST", build_mkdir)
    meta("remove", "DELETE", build_remove)
    meta("move", "POST", build_move)
    meta("chmod", "PATCH", build_chmod)
