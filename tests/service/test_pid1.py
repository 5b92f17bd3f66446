# The guest's PID 1 (§9.2): like the hosted `sleep infinity` it never reaps, so
# every orphan that exits stays a zombie (counted by /_local/stats); the agent is
# its child and no subreaper; PID 1 exits, taking the guest with it, when the
# service stops the generation or its control connection closes.

import shutil
import signal

from svchelpers import Service, create_container, host_procs, wait_for

ORPHAN = "sh -c 'sleep 0.2 >/dev/null 2>&1 & echo $!'"    # the subshell exits at once: sleep is orphaned


def _state(c, pid):
    out = c.exec("cat /proc/%s/stat 2>/dev/null | sed 's/.*) //' | cut -d' ' -f1,2" % pid)["stdout"].split()
    return out or None                                      # [state, ppid]


def test_orphans_stay_zombies(node_container):
    c = node_container
    assert c.api.get("/_local/stats").json()["zombies"][c.id] == 0
    pids = [c.exec(ORPHAN)["stdout"].strip() for _ in range(2)]
    for pid in pids:
        assert wait_for(lambda: (_state(c, pid) or [None])[0] == "Z") and _state(c, pid) == ["Z", "1"]
    assert c.api.get("/_local/stats").json()["zombies"][c.id] == 2
    assert int(c.exec("ps -e -o stat= | grep -c Z")["stdout"]) == 2


def test_agent_is_a_child_of_pid1(node_container):
    # From the command's shell up: timeout, then the agent, then PID 1 (parent pids from /proc/<pid>/stat).
    out = node_container.exec("p=$PPID; for i in 1 2 3; do echo $p; p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2); "
                              "done; tr '\\0' ' ' < /proc/$PPID/cmdline")
    timeout_pid, agent_pid, init_pid, timeout_cmd = out["stdout"].splitlines()
    assert timeout_cmd.startswith("timeout --signal=KILL 30s /bin/sh -lc ")
    assert agent_pid not in ("0", "1") and init_pid == "1"


def test_reaping_init_flag(start_service):
    svc = start_service("--reaping-init")
    c = create_container(svc.api)
    pid = c.exec(ORPHAN)["stdout"].strip()
    wait_for(lambda: _state(c, pid) is None)
    assert svc.api.get("/_local/stats").json()["zombies"] == {c.id: 0}


def test_pid1_exits_when_the_service_dies(tmp_path):
    svc = Service(str(tmp_path))
    try:
        c = create_container(svc.api)
        c.exec("setsid sleep 4646.5 >/dev/null 2>&1 </dev/null &")
        wait_for(lambda: host_procs("4646.5"))
        svc.proc.send_signal(signal.SIGKILL)              # no cleanup: only the lifeline closes
        svc.proc.wait()
        wait_for(lambda: not host_procs("4646.5"), timeout=10)
        wait_for(lambda: not host_procs(str(tmp_path)), timeout=10)     # guestinit and unshare
    finally:
        if svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait()
        svc.log.close()
        shutil.rmtree(svc.state, ignore_errors=True)
