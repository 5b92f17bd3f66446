# Routes GET /capabilities and GET/POST/DELETE /containers (§1.4, §2).

from . import config
from .errors import ApiError
from .router import Route
from .server import json_response
from .validate import valid_container_id, valid_idempotency_key


def _capabilities_query(req):
    if req.raw_query:
        raise ApiError(400, "invalid_request")


def _containers_query(req):
    q = req.query
    if req.method == "GET":
        if q.has("createdAt"):
            raise ApiError(400, "invalid_request")
        q.only({"id"}, "invalid_container_id")
    elif req.method == "POST":
        if q.has("id") or q.has("createdAt"):
            raise ApiError(400, "invalid_request")
        q.only(set(), "invalid_container_id")
        key = req.header("Idempotency-Key")
        if key is not None and not valid_idempotency_key(key):
            raise ApiError(400, "invalid_idempotency_key")
    else:
        if q.count("createdAt") > 1:
            raise ApiError(400, "invalid_request")
        q.only({"id", "createdAt"}, "invalid_container_id")
    if q.has("id") and not valid_container_id(q.get("id")):
        raise ApiError(400, "invalid_container_id")


def register(router, svc):
    account = svc.account

    def capabilities(req):
        return json_response(config.capabilities())

    def list_containers(req):
        return json_response(account.doc())

    def create(req):
        doc = req.json_body(config.CONTAINERS_BODY_CAP)
        catalog, image = doc.get("catalogId"), doc.get("imageId")
        if "catalogId" in doc and "imageId" in doc:
            raise ApiError(400, "invalid_request")
        if "catalogId" in doc and not isinstance(catalog, str):
            raise ApiError(400, "invalid_request")
        if "imageId" in doc and not isinstance(image, str):
            raise ApiError(400, "invalid_request")
        size = doc.get("size", "lite")
        if not isinstance(size, str) or size not in config.SIZES:
            raise ApiError(400, "invalid_size")
        internet = doc.get("internet", True)
        if not isinstance(internet, bool):
            raise ApiError(400, "invalid_internet_policy")
        if "workspaceId" in doc:
            if not isinstance(doc["workspaceId"], str) or "catalogId" in doc or "imageId" in doc:
                raise ApiError(400, "invalid_request")
            raise ApiError(503, "persistence_unavailable")
        if "imageId" in doc:
            raise ApiError(404, "image_not_found")     # no custom images exist locally
        if catalog is None:
            catalog = svc.opts.default_catalog
        elif catalog not in config.CATALOG_IDS:
            raise ApiError(404, "image_not_found")
        return json_response(account.create(size, catalog, internet, req.header("Idempotency-Key")))

    def delete(req):
        return json_response(account.delete(req.query.get("id"), req.query.get("createdAt")))

    router.add(Route("/capabilities", {"GET": capabilities}, _capabilities_query, auth=False))
    router.add(Route("/containers", {"GET": list_containers, "POST": create, "DELETE": delete},
                     _containers_query))
