# Plan and deadlines (§2, §9.4): builder is the default plan (idle 10 min, hard
# 1 h); a call renews the idle deadline once, when its process starts, never at
# its end; running guest processes renew nothing; managed jobs renew every 15 s.

import datetime
import time

from svchelpers import create_container, wait_for
from test_jobs import finish, running, start


def _alive(api, c):
    return any(x["id"] == c.id and x["createdAt"] == c.created_at for x in api.get("/containers").json()["containers"])


def _ms(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000


def test_builder_is_the_default_plan(node_container):
    doc = node_container.api.get("/containers").json()
    assert doc["plan"] == "builder"
    assert (doc["limits"]["idleTimeoutMs"], doc["limits"]["maxSessionMs"]) == (600000, 3600000)
    mine = [x for x in doc["containers"] if x["id"] == node_container.id][0]
    assert _ms(mine["expiresAt"]) - _ms(mine["createdAt"]) == 3600000


def test_calls_renew_only_when_they_start(start_service):
    svc = start_service("--idle-timeout-ms", "3000")
    c = create_container(svc.api)
    t0 = time.monotonic()
    assert c.exec("sleep 2.5")["exitCode"] == 0        # renewed at t0, not again at t0+2.5
    time.sleep(max(0.0, t0 + 4.0 - time.monotonic()))
    wait_for(lambda: not _alive(svc.api, c), timeout=0.5)
    r = svc.api.post("/containers/exec", c.q, {"command": "true"})
    assert (r.status, r.error) == (409, "container_not_running")


def test_guest_processes_and_jobs_do_not_renew_quickly(start_service):
    svc = start_service("--idle-timeout-ms", "1500")
    c = create_container(svc.api)
    c.exec("setsid sleep 300 >/dev/null 2>&1 </dev/null &")
    s = start(c, command="sleep 30")
    running(c, s["id"])
    wait_for(lambda: not _alive(svc.api, c), timeout=5)           # the job's first renewal is due at 15 s
    assert finish(c, s["id"])["status"] == "canceled"


def test_job_renewal_interval(start_service):
    svc = start_service("--idle-timeout-ms", "1500", "--job-renew-ms", "300")
    c = create_container(svc.api)
    s = start(c, command="sleep 30")
    running(c, s["id"])
    time.sleep(3)
    assert _alive(svc.api, c)
    c.api.delete("/containers/executions/" + s["id"], c.q)
    assert finish(c, s["id"])["status"] == "canceled"
    wait_for(lambda: not _alive(svc.api, c), timeout=5)


def test_lenient_idle_flag(start_service):
    # Wide margins: the slack between a renewal and the deadline is what a
    # loaded machine (make asan on 2 cores) may take to schedule the service.
    svc = start_service("--idle-timeout-ms", "6000", "--lenient-idle")
    c = create_container(svc.api)
    t0 = time.monotonic()
    assert c.exec("sleep 4.5")["exitCode"] == 0        # renewed again at its end: alive until t0+10.5
    time.sleep(max(0.0, t0 + 7.5 - time.monotonic()))  # strict renewal would have ended it at t0+6
    assert _alive(svc.api, c)
    s = start(c, command="sleep 60")                   # jobs renew every min(15 s, idle/3) = 2 s
    running(c, s["id"])
    time.sleep(8)
    assert _alive(svc.api, c)
    c.delete()
