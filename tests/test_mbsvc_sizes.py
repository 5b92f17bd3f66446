"""The local service's --enforce-sizes: a container held to its size's CPU
share (lite: 1/16 of a vCPU) and memory, as on the hosted service."""
import os

import pytest

import mbtest

LOOP = "i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done"
# wall ms of the loop, the shell's own CPU time (`times`: the loop runs in
# the shell; date's subshells are its children), the guest's cgroups
MEASURED = ("a=$(date +%%s%%N); %s; b=$(date +%%s%%N); echo $(( (b - a) / 1000000 )); times; "
            "cat /proc/self/cgroup" % LOOP)


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


def seconds(t):
    """`times`'s 1m2.345s as seconds."""
    m, _, sec = t.rstrip("s").partition("m")
    return int(m) * 60 + float(sec)


def measure(svc, ident):
    """(wall s, CPU s of the loop, the guest's /proc/self/cgroup lines)."""
    doc = svc.exec(ident, MEASURED, timeout_ms=60000)
    assert doc["exitCode"] == 0, doc
    lines = doc["stdout"].splitlines()
    user, system = lines[1].split()
    return int(lines[0]) / 1000.0, seconds(user) + seconds(system), lines[3:]


def cpu_share(cgroup_lines):
    """The CPU share the guest's cgroup allows (quota / period), read on
    the host (v2: cpu.max; v1: cpu.cfs_quota_us / cpu.cfs_period_us)."""
    for line in cgroup_lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            with open("/sys/fs/cgroup%s/cpu.max" % path) as f:
                quota, period = f.read().split()
            return int(quota) / int(period)
        if "cpu" in controllers.split(","):
            base = "/sys/fs/cgroup/cpu%s/cpu.cfs_" % path
            with open(base + "quota_us") as f, open(base + "period_us") as g:
                return int(f.read()) / int(g.read())
    raise AssertionError("no cpu cgroup in %r" % cgroup_lines)


def test_a_cpu_loop_on_lite_gets_a_16th_of_a_cpu(service, container):
    """What makes lite slow, not how slow this machine is: the guest's
    cgroup allows 1/16 of a CPU, and a busy loop there uses no more than
    that share of its wall time (a busy machine only lowers the share, so
    the bound holds however loaded the machine is)."""
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    wall, cpu, _ = measure(service, container)
    svc = mbtest.Service(extra_args=["--enforce-sizes"])
    try:
        ident = svc.create_container()
        lwall, lcpu, groups = measure(svc, ident)
        print("the loop: %.2f s CPU in %.2f s unbounded; %.2f s CPU in %.2f s on lite"
              % (cpu, wall, lcpu, lwall))
        assert cpu_share(groups) == 0.0625, groups
        assert lcpu > 0, (lcpu, lwall)
        assert lcpu <= 0.2 * lwall, (lcpu, lwall)
        svc.delete_container(ident)
    finally:
        svc.stop()
