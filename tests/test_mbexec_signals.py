"""mbexec: Ctrl-C, SIGTERM, --timeout, a closed stdout (exec strategy)."""
import os
import signal
import subprocess
import time

import pytest

import mbtest
from test_mbexec_helpers import (mbx, module_mount, popen, remote_procs, unique,
                                 wait_remote_gone)


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def start_and_wait_for_line(service, args, cwd, expect=b"started\n"):
    p = popen(service, args, cwd)
    line = p.stdout.readline()
    assert line == expect, (line, p.stderr.read() if p.poll() is not None else b"")
    return p


def test_ctrl_c_remote_process_is_gone(service, container, mnt):
    tag = unique("mbxint")
    p = start_and_wait_for_line(
        service, ["sh", "-c", "echo started; while :; do sleep 1; done # %s" % tag],
        mnt.mountpoint)
    assert remote_procs(service, container, tag)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert wait_remote_gone(service, container, tag), remote_procs(service, container, tag)


def test_first_ctrl_c_is_forwarded_second_ends_it(service, container, mnt):
    tag = unique("mbxtrap")
    script = ("trap 'echo got-int' INT; echo started; "
              "while :; do sleep 0.2; done # %s" % tag)
    p = start_and_wait_for_line(service, ["sh", "-c", script], mnt.mountpoint)
    p.send_signal(signal.SIGINT)
    assert p.stdout.readline() == b"got-int\n"
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert wait_remote_gone(service, container, tag)


def test_sigterm_ends_the_remote_command_143(service, container, mnt):
    tag = unique("mbxterm")
    p = start_and_wait_for_line(
        service, ["sh", "-c", "trap '' INT; echo started; while :; do sleep 1; done # %s" % tag],
        mnt.mountpoint)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert wait_remote_gone(service, container, tag)


def test_timeout_is_124_and_ends_the_command(service, container, mnt):
    tag = unique("mbxtmo")
    p = mbx(service, ["--timeout", "2", "sh", "-c", "echo before; while :; do sleep 1; done # %s" % tag],
            mnt.mountpoint, timeout=60)
    assert p.returncode == 124, p.stderr
    assert p.stdout == b"before\n"
    assert wait_remote_gone(service, container, tag)


def test_timeout_not_reached_keeps_the_status(service, mnt):
    p = mbx(service, ["--timeout", "30s", "sh", "-c", "exit 7"], mnt.mountpoint)
    assert p.returncode == 7, p.stderr


def test_json_timeout(service, mnt):
    import json
    p = mbx(service, ["--json", "--timeout", "500ms", "sleep", "30"], mnt.mountpoint, timeout=60)
    assert p.returncode == 124
    doc = json.loads(p.stdout)
    assert doc["timedOut"] is True


def test_closed_stdout_ends_the_command(service, container, mnt):
    tag = unique("mbxpipe")
    p = subprocess.run("%s sh -c 'yes # %s' | head -3" % (mbtest.MBEXEC, tag), shell=True,
                       cwd=mnt.mountpoint, env=service.env(), capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.stdout == b"y\ny\ny\n"
    assert wait_remote_gone(service, container, tag)


def test_command_of_a_killed_mbexec_is_ended_by_the_guest(service, container, mnt):
    tag = unique("mbxorphan")
    p = popen(service, ["sh", "-c", "echo started; while :; do sleep 1; done # %s" % tag],
              mnt.mountpoint, env=service.env(MBEXEC_ORPHAN_SECONDS="8"))
    assert p.stdout.readline() == b"started\n"   # from the launch: no poll yet
    p.kill()
    p.wait()
    assert remote_procs(service, container, tag)
    assert wait_remote_gone(service, container, tag, seconds=40)


def test_paused_reader_is_not_taken_for_a_dead_mbexec(service, mnt):
    # stdout is not read for longer than the watchdog's patience: the
    # client's heartbeat keeps the command alive
    p = popen(service, ["sh", "-c", "sleep 3; head -c 3000000 /dev/zero; sleep 14; echo; echo end"],
              mnt.mountpoint, env=service.env(MBEXEC_ORPHAN_SECONDS="8"))
    time.sleep(19)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert len(out) == 3000000 + 5 and out.endswith(b"\nend\n")


def _group_lives():
    """signal.sh's group_lives, as the guest runs it."""
    import re
    with open(os.path.join(mbtest.ROOT, "shim", "guest", "signal.sh")) as f:
        m = re.search(r"^group_lives\(\) \{\n.*?^\}\n", f.read(), re.M | re.S)
    assert m, "signal.sh has no group_lives"
    return m.group(0)


def test_a_group_left_with_zombies_has_ended():
    """--timeout and SIGTERM wait up to 2 s for the command's process group
    to go after TERM. A child whose shell died first stays a zombie (PID 1
    of a container never reaps), and kill -0 counts it: the wait always
    lasted its 2 s. group_lives counts running processes only."""
    fn = _group_lives()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os._exit(0)
    try:
        # the child is a zombie until reaped: its group has no running process
        while True:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        check = fn + 'if group_lives %d; then echo lives; else echo ended; fi\n' % pid
        assert subprocess.run(["sh", "-c", "kill -0 -%d && echo lives" % pid],
                              capture_output=True).stdout == b"lives\n"
        assert subprocess.run(["sh", "-c", check], capture_output=True).stdout == b"ended\n"
    finally:
        os.waitpid(pid, 0)
    live = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        check = fn + 'if group_lives %d; then echo lives; else echo ended; fi\n' % live.pid
        assert subprocess.run(["sh", "-c", check], capture_output=True).stdout == b"lives\n"
    finally:
        live.kill()
        live.wait()
