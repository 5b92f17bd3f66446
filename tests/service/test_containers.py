# Containers (§2): create, Idempotency-Key records, slots, generations,
# DELETE semantics, plan limits and the status document.

import re
import threading

from svchelpers import create_container

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_create_status_and_generation(api):
    r = api.post("/containers", body={}, headers={"Idempotency-Key": "create-basic"})
    assert r.status == 200
    doc = r.json()
    creation = doc["creation"]
    assert creation["status"] == "running"
    assert ISO.match(creation["createdAt"])
    listed = [c for c in doc["containers"] if c["id"] == creation["containerId"]]
    assert listed and listed[0]["createdAt"] == creation["createdAt"]
    c = listed[0]
    assert c["status"] == "running" and c["size"] == "lite" and c["catalogId"] == "node"
    assert ISO.match(c["expiresAt"]) and c["expiresAt"] > c["createdAt"]
    assert doc["limits"]["maxSessionMs"] == 3600000 and doc["plan"] == "builder"
    # same key, same body: 200 with the same creation, no new start
    starts = doc["usage"]["starts"]
    again = api.post("/containers", body={}, headers={"Idempotency-Key": "create-basic"})
    assert again.status == 200
    assert again.json()["creation"] == creation
    assert again.json()["usage"]["starts"] == starts
    # different fingerprint
    r = api.post("/containers", body={"size": "small"}, headers={"Idempotency-Key": "create-basic"})
    assert (r.status, r.error) == (409, "idempotency_key_conflict")
    # after delete the key reports creation_no_longer_running
    q = {"id": creation["containerId"], "createdAt": creation["createdAt"]}
    assert api.delete("/containers", q).status == 200
    r = api.post("/containers", body={}, headers={"Idempotency-Key": "create-basic"})
    assert (r.status, r.error) == (409, "creation_no_longer_running")
    assert r.json()["creation"]["status"] == "stopped"
    assert r.json()["creation"]["id"] == creation["id"]


def test_unkeyed_create_has_no_creation(api):
    r = api.post("/containers", body={"ignored": 1})
    assert r.status == 200 and "creation" not in r.json()
    mine = max(r.json()["containers"], key=lambda c: c["createdAt"])
    assert api.delete("/containers", {"id": mine["id"], "createdAt": mine["createdAt"]}).status == 200


def test_create_validation(api):
    h = {"Idempotency-Key": "bad key!"}
    assert api.post("/containers", body={}, headers=h).error == "invalid_idempotency_key"
    assert api.post("/containers", body={"size": "huge"}).error == "invalid_size"
    assert api.post("/containers", body={"internet": "yes"}).error == "invalid_internet_policy"
    assert api.post("/containers", body={"catalogId": "cobol"}).error == "image_not_found"
    assert api.post("/containers", body={"catalogId": 3}).error == "invalid_request"
    assert api.post("/containers", body={"catalogId": "node", "imageId": "x"}).error == "invalid_request"
    assert api.post("/containers", body={"imageId": "img"}).error == "image_not_found"
    assert api.post("/containers", body=b"[1]").error == "invalid_request"
    assert api.post("/containers", body=b"").error == "invalid_request"
    assert api.post("/containers", {"id": "small"}, body={}).error == "invalid_request"


def test_slots_lowest_free_first_and_generations_increase(api):
    a = create_container(api)
    b = create_container(api)
    ids = {a.id, b.id}
    assert "small" in ids or len(ids) == 2
    first_gen = a.created_at
    slot = a.id
    assert a.delete().status == 200
    c = create_container(api)
    assert c.id == slot                      # the freed slot is reused first
    assert c.created_at > first_gen          # a new generation
    old = api.post("/containers/exec", {"id": slot, "createdAt": first_gen}, {"command": "true"})
    assert (old.status, old.error) == (409, "container_not_running")
    b.delete()
    c.delete()


def test_delete_semantics(api):
    c = create_container(api)
    assert api.delete("/containers", {"id": c.id, "createdAt": "2000-01-01T00:00:00.000Z"}).error == \
        "container_not_running"
    r = api.delete("/containers", c.q)
    assert r.status == 200
    assert all(x["id"] != c.id for x in r.json()["containers"])
    r = api.delete("/containers", c.q)
    assert (r.status, r.error) == (409, "container_not_running")
    assert api.delete("/containers", {"id": "c77"}).error == "container_not_running"
    assert api.delete("/containers", {"id": "zz"}).error == "invalid_container_id"


def test_delete_without_id(start_service):
    svc = start_service()
    api = svc.api
    assert api.delete("/containers").status == 200           # none: no-op
    a = create_container(api)
    b = create_container(api)
    assert api.delete("/containers").error == "container_id_required"
    a.delete()
    r = api.delete("/containers")
    assert r.status == 200 and r.json()["containers"] == []


def test_builder_plan_limits(start_service):
    svc = start_service("--plan", "builder")
    api = svc.api
    doc = api.get("/containers").json()
    assert doc["limits"]["maxContainers"] == 5 and doc["limits"]["idleTimeoutMs"] == 600000
    made = [create_container(api) for _ in range(5)]
    assert sorted(c.id for c in made) == sorted(["small", "c1", "c2", "c3", "c4"])
    r = api.post("/containers", body={})
    assert (r.status, r.error) == (409, "container_limit_exceeded")
    made[2].delete()
    r = api.post("/containers", body={"size": "xl"})         # 28 CU + 4 lite > 28
    assert (r.status, r.error) == (409, "compute_capacity_exceeded")
    for c in made:
        c.delete()


def test_concurrent_same_key_single_start(api):
    results = []

    def go():
        a = api.fresh()
        results.append(a.post("/containers", body={}, headers={"Idempotency-Key": "race-key"}))
        a.close()
    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status == 200 for r in results)
    ids = {r.json()["creation"]["id"] for r in results}
    assert len(ids) == 1
    statuses = {r.json()["creation"]["status"] for r in results}
    assert statuses <= {"running", "starting"}
    cid = results[0].json()["creation"]["containerId"]
    running = [c for c in api.get("/containers").json()["containers"] if c["id"] == cid]
    api.delete("/containers", {"id": cid, "createdAt": running[0]["createdAt"]})


def test_idle_timeout_and_renewal(start_service):
    import time
    svc = start_service("--idle-timeout-ms", "1500")
    api = svc.api
    c = create_container(api)
    for _ in range(3):                  # exec renews idle time
        time.sleep(0.8)
        assert c.exec("true")["exitCode"] == 0
    time.sleep(2.0)
    r = api.post("/containers/exec", c.q, {"command": "true"})
    assert (r.status, r.error) == (409, "container_not_running")
    assert api.get("/containers").json()["containers"] == []
