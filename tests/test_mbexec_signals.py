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
