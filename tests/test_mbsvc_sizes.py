"""The local service's --enforce-sizes: a container held to its size's CPU
share (lite: 1/16 of a vCPU) and memory, as on the hosted service."""
import os

import pytest

import mbtest

LOOP = "i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done"
TIMED = "a=$(date +%%s%%N); %s; b=$(date +%%s%%N); echo $(( (b - a) / 1000000 ))" % LOOP


def cgroups_usable():
    if os.geteuid() != 0:
        return "needs root to make cgroups"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            have = f.read().split()
        return None if "cpu" in have and "memory" in have else "cgroup v2 without cpu and memory controllers"
    for c in ("cpu", "memory"):
        d = "/sys/fs/cgroup/%s" % c
        if not os.access(d, os.W_OK):
            return "the cgroup v1 %s controller is not writable (not delegated)" % c
    return None


def loop_ms(svc, ident):
    doc = svc.exec(ident, TIMED, timeout_ms=60000)
    assert doc["exitCode"] == 0, doc
    return int(doc["stdout"].split()[-1])


def test_a_cpu_loop_is_at_least_5x_slower_on_lite(service, container):
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    free = min(loop_ms(service, container) for _ in range(2))
    svc = mbtest.Service(extra_args=["--enforce-sizes"])
    try:
        ident = svc.create_container()
        lite = loop_ms(svc, ident)
        print("a shell loop: %d ms unbounded, %d ms on lite (%.1fx)" % (free, lite, lite / max(free, 1)))
        assert lite >= 5 * free, (free, lite)
        svc.delete_container(ident)
    finally:
        svc.stop()
