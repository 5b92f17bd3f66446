# Managed jobs as the hosted runtime runs them (§5.2, §8-1, §9.3): under
# `timeout --signal=KILL`, so a signal death reports no exit code; a background
# child holding a pipe keeps the job running; the pty is the guest's own; output
# events batched (newest runtime) or one per read with the 510-event stop (d93e920).

import time

import pytest

from svchelpers import Service, create_container, host_procs, wait_for
from test_jobs import finish, job, running, start


@pytest.fixture(scope="module")
def own_service(tmp_path_factory):
    """A service of its own: these jobs must not fill the session service's slot histories."""
    svc = Service(str(tmp_path_factory.mktemp("jobs-runtime")))
    yield svc
    rc, log = svc.stop()
    assert rc == 0 and "Traceback" not in log, log


@pytest.fixture
def container(own_service):
    c = create_container(own_service.api.fresh(), catalogId="python")
    yield c
    c.delete()
    c.api.close()


def test_job_runs_under_timeout(container):
    d = finish(container, start(container, command="tr '\\0' ' ' < /proc/$PPID/cmdline", timeoutMs=4500)["id"])
    assert d["stdout"].startswith("timeout --signal=KILL 4.5s /bin/sh -lc ")
    d = finish(container, start(container, argv=["sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline"])["id"])
    assert d["stdout"] == "timeout --signal=KILL 30s sh -c tr '\\0' ' ' < /proc/$PPID/cmdline "


def test_signal_death_has_no_exit_code(container):
    s = start(container, command="kill -TERM $$")
    d = finish(container, s["id"])
    assert (d["status"], d["exitCode"]) == ("failed", None)
    s = start(container, command="exit 143")
    d = finish(container, s["id"])
    assert (d["status"], d["exitCode"]) == ("failed", 143)


def test_background_child_holds_the_job(container):
    s = start(container, command="sleep 4800.5 & echo started", timeoutMs=1500)
    running(container, s["id"])
    wait_for(lambda: "started" in job(container, s["id"])["stdout"])
    time.sleep(0.5)
    assert job(container, s["id"])["status"] == "running"          # the shell is gone, the pipe is not
    d = finish(container, s["id"])
    assert (d["status"], d["timedOut"], d["exitCode"]) == ("timed_out", True, None)
    wait_for(lambda: not host_procs("4800.5"), timeout=5)


def test_pty_is_the_guests(container):
    s = start(container, command="tty; stty size", stdin=True, pty={"cols": 90, "rows": 20})
    d = finish(container, s["id"])
    assert d["status"] == "succeeded" and d["stdout"] == "/dev/pts/0\r\n20 90\r\n"


def test_output_events_per_read(start_service):
    svc = start_service("--output-events", "per-read")
    c = create_container(svc.api)
    cmd = "i=0; while [ $i -lt 4000 ]; do echo $i; i=$((i+1)); sleep 0.002; done"   # < 20 KB in all
    d = finish(c, start(c, command=cmd)["id"], timeout=60)
    assert (d["status"], d["outputTruncated"], d["exitCode"]) == ("output_limit", True, None)
    assert d["cursor"] <= 510 and d["outputBytes"] < 20000
    small = finish(c, start(c, command="echo one; sleep 0.2; echo two")["id"])
    assert small["status"] == "succeeded" and small["cursor"] == 2


def test_output_events_batched_by_default(container):
    cmd = "i=0; while [ $i -lt 1500 ]; do echo $i; i=$((i+1)); sleep 0.002; done"
    d = finish(container, start(container, command=cmd)["id"], timeout=60)
    assert d["status"] == "succeeded" and d["cursor"] <= 512
    assert d["stdout"] == "".join("%d\n" % i for i in range(1500))


def test_legacy_exit_codes_flag(start_service):
    svc = start_service("--legacy-exit-codes")
    c = create_container(svc.api)
    d = finish(c, start(c, command="kill -TERM $$")["id"])
    assert (d["status"], d["exitCode"]) == ("failed", 143)
    d = finish(c, start(c, argv=["no-such-program-xyz"])["id"])
    assert (d["status"], d["exitCode"]) == ("failed", None)
    d = finish(c, start(c, command="tr '\\0' ' ' < /proc/$PPID/cmdline")["id"])
    assert not d["stdout"].startswith("timeout")
    assert c.exec("kill -TERM $$")["exitCode"] == 143
