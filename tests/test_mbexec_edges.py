"""mbexec's rough edges as a user meets them: -v, long retries, a lost
mbexec and --attach, -C with --mount, the orphan watchdog's figure, and
what a run leaves on the guest."""
import os
import re
import signal
import time

import pytest

from test_mbexec_helpers import (fake_mount, mbx, module_mount, popen, remote_procs, rmtree, sh,
                                 unique)


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def test_verbose_logs_each_request(service, mnt):
    p = mbx(service, ["-v", "true"], mnt.mountpoint)
    assert p.returncode == 0
    err = p.stderr.decode()
    assert re.search(r"^mbexec: info: POST /containers/exec 200 \d+ ms$", err, re.M), err
    assert service.key not in err


def test_long_retries_are_said_once(service, mnt):
    service.fault(route="POST /containers/exec", count=7, status=429, error="execution_limit")
    try:
        p = mbx(service, ["sh", "-c", "echo through"], mnt.mountpoint)
    finally:
        service.clear_faults()
    assert p.returncode == 0 and p.stdout == b"through\n", p.stderr
    err = p.stderr.decode()
    assert err.count("still waiting") == 1, err
    assert "execution_limit" in err or "4 operations" in err or "busy" in err, err


def test_lost_contact_says_how_to_reattach_and_attach_finishes(service, container, mnt):
    tag = unique("attach")
    # longer than a poll's wait on the guest (up to 15 s), so that the
    # poll in flight when the faults begin ends without the command's end
    # and the next ones fail
    script = "echo one; sleep 24; echo two; echo err >&2; exit 9 # %s" % tag
    # mbexec gives up after 5 s; the guest keeps the command for 90 s
    p = popen(service, ["sh", "-c", script], mnt.mountpoint,
              env=service.env(MBEXEC_ORPHAN_SECONDS="90", MBEXEC_LOST_SECONDS="5"))
    assert p.stdout.readline() == b"one\n"
    # every further exec fails: mbexec gives up and says how to come back
    service.fault(route="POST /containers/exec", count=1000, status=503,
                  error="execution_unavailable")
    try:
        out, err = p.communicate(timeout=150)
    finally:
        service.clear_faults()
    assert p.returncode == 255
    m = re.search(r"`mbexec --attach ([0-9a-f]{16})` in the same mount within \d+ s",
                  err.decode())
    assert m, err
    a = mbx(service, ["--attach", m.group(1)], mnt.mountpoint)
    assert a.returncode == 9, a.stderr
    assert a.stdout == b"two\n" and a.stderr == b"err\n"


def test_attach_needs_a_run_id(service, mnt):
    p = mbx(service, ["--attach", "nope"], mnt.mountpoint)
    assert p.returncode == 125 and b"invalid --attach" in p.stderr
    p = mbx(service, ["--attach", "0123456789abcdef", "true"], mnt.mountpoint)
    assert p.returncode == 125 and b"no command" in p.stderr
    p = mbx(service, ["--attach", "0123456789abcdef"], mnt.mountpoint)
    assert p.returncode == 255 and b"no run 0123456789abcdef" in p.stderr


def test_dash_C_is_relative_to_the_mount_given(service, mnt, tmp_path):
    os.makedirs(mnt.path("subc"), exist_ok=True)
    p = mbx(service, ["--mount", mnt.mountpoint, "-C", "subc", "pwd"], str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"/workspace/subc\n"


def test_orphan_watchdog_keeps_its_figure(service, container, mnt):
    tag = unique("orph")
    p = popen(service, ["sh", "-c", "echo started; while :; do sleep 1; done # %s" % tag],
              mnt.mountpoint, env=service.env(MBEXEC_ORPHAN_SECONDS="10"))
    assert p.stdout.readline() == b"started\n"
    p.send_signal(signal.SIGKILL)
    p.wait()
    t0 = time.time()
    time.sleep(5)
    assert remote_procs(service, container, tag), "ended before the watchdog's 10 s"
    while remote_procs(service, container, tag) and time.time() - t0 < 40:
        time.sleep(0.5)
    assert not remote_procs(service, container, tag)
    assert time.time() - t0 < 30


def test_finished_runs_and_their_helpers_leave_nothing(service):
    ident = service.create_container()
    d = fake_mount(service, ident)
    env = service.env(MBEXEC_KEEP_SECONDS="3")
    try:
        for i in range(20):
            p = mbx(service, ["sh", "-c", "cat; echo %d" % i], d, input=b"in", env=env)
            assert p.returncode == 0 and p.stdout == b"in%d\n" % i
        time.sleep(1)
        # no feeder or run shell outlives its run
        assert "run-" not in sh(service, ident, "ps -eo args | grep -v grep | grep run- || true")
        time.sleep(8)
        left = sh(service, ident, "ls /tmp/.mbexec | grep -v '^[.]' | grep -v -- - || true")
        assert left.split() == [], left
    finally:
        rmtree(d)
        service.delete_container(ident)
