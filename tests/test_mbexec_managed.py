"""mbexec: the managed strategy (--mode managed), and -t/-i from a terminal
(a pty on the guest through script(1), no managed job), driven through a
real pseudo-terminal."""
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

import mbtest
from test_mbexec_helpers import (jobs_created, mbx, module_mount, popen, remote_procs, run_in_pty, unique,
                                 wait_remote_gone)


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def test_managed_mode_runs_a_job(service, mnt):
    before = jobs_created(service)
    p = mbx(service, ["--mode", "managed", "sh", "-c", "echo out; echo err >&2; pwd; exit 5"],
            mnt.mountpoint)
    assert p.returncode == 5, p.stderr
    assert p.stdout == b"out\n/workspace\n"
    assert p.stderr == b"err\n"
    assert jobs_created(service) == before + 1


def test_managed_stdin_and_env(service, mnt):
    p = mbx(service, ["--mode", "managed", "-e", "MBX_X=1 2", "sh", "-c", 'echo "$MBX_X"; wc -l'],
            mnt.mountpoint, input=b"a\nb\nc\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [b"1", b"2", b"3"]


def test_managed_signal_death_is_128_plus_n(service, mnt):
    p = mbx(service, ["--mode", "managed", "sh", "-c", "kill -9 $$"], mnt.mountpoint)
    assert p.returncode == 137, p.stderr


def test_managed_json(service, mnt):
    p = mbx(service, ["--mode", "managed", "--json", "echo", "hi"], mnt.mountpoint)
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["exitCode"] == 0
    assert doc["stdout"] == "hi\n" and doc["strategy"] == "managed" and doc["remoteId"]


def test_managed_ctrl_c(service, container, mnt):
    tag = unique("mgdint")
    p = popen(service, ["--mode", "managed", "sh", "-c", "echo started; while :; do sleep 1; done # %s" % tag],
              mnt.mountpoint)
    assert p.stdout.readline() == b"started\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert wait_remote_gone(service, container, tag)


def test_managed_timeout(service, container, mnt):
    tag = unique("mgdtmo")
    p = mbx(service, ["--mode", "managed", "--timeout", "2", "sh", "-c",
                      "while :; do sleep 1; done # %s" % tag], mnt.mountpoint, timeout=60)
    assert p.returncode == 124, p.stderr
    assert wait_remote_gone(service, container, tag)


def test_tty_runs_in_a_pty_of_the_local_size(service, mnt):
    status, out, before, after = run_in_pty(service, ["-t", "sh", "-c", "tty; stty size"],
                                            mnt.mountpoint, rows=33, cols=101)
    assert status == 0, out
    lines = out.replace(b"\r", b"").split(b"\n")
    assert lines[0].startswith(b"/dev/pts/"), out
    assert lines[1] == b"33 101", out
    assert after == before   # the local terminal is restored


TERM_PROBE = 'echo "[$TERM]"; tput cols; tput clear; echo "clear=$?"'


@pytest.mark.parametrize("mode", ["exec", "managed"])
def test_tty_passes_term_as_ssh_does(service, mnt, mode):
    status, out, _, after = run_in_pty(service, ["--mode", mode, "-t", "sh", "-c", TERM_PROBE],
                                       mnt.mountpoint, cols=101, env={"TERM": "xterm-256color"})
    assert status == 0, out
    lines = out.replace(b"\r", b"").split(b"\n")
    assert lines[0] == b"[xterm-256color]", out
    assert lines[1] == b"101", out              # tput knows the terminal and its size
    assert b"\x1b[2J" in out and b"clear=0" in out, out


def test_tty_without_local_term_sets_none(service, mnt):
    # ssh sends an empty TERM then, and sshd sets none: the same here
    status, out, _, _ = run_in_pty(service, ["-t", "sh", "-c", "echo \"[${TERM-unset}]\""],
                                   mnt.mountpoint, env={"TERM": None})
    assert status == 0, out
    assert out.replace(b"\r", b"").split(b"\n")[0] == b"[unset]", out


def test_tty_term_from_dash_e_wins(service, mnt):
    status, out, _, _ = run_in_pty(service, ["-t", "-e", "TERM=vt100", "sh", "-c", "echo \"[$TERM]\""],
                                   mnt.mountpoint, env={"TERM": "xterm-256color"})
    assert status == 0, out
    assert out.replace(b"\r", b"").split(b"\n")[0] == b"[vt100]", out


def test_tty_interactive_input_and_ctrl_c(service, mnt):
    status, out, before, after = run_in_pty(
        service, ["-t", "sh", "-c", "read x; echo \"got $x\"; echo ready; sleep 100"],
        mnt.mountpoint, keys=[(b"", b"hello\r"), (b"ready", b"\x03")])
    assert b"got hello" in out, out
    assert status == 130, out
    assert after == before


def test_tty_paste_arrives_whole_and_in_order(service, mnt):
    # each read of a terminal goes up at once: a burst is many small chunks
    lines = b"".join(b"%04d %s\r" % (i, b"x" * 60) for i in range(300))
    status, out, _, after = run_in_pty(
        service, ["-t", "sh", "-c", "stty -echo; echo ready; cksum"], mnt.mountpoint,
        keys=[(b"ready", lines + b"\x04")])
    assert status == 0, out
    want = subprocess.run(["cksum"], input=lines.replace(b"\r", b"\n"),
                          capture_output=True).stdout.strip()
    assert want in out.replace(b"\r", b""), (want, out[-200:])


def test_tty_restored_after_sigterm(service, container, mnt):
    tag = unique("ttyterm")
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    p = subprocess.Popen([mbtest.MBEXEC, "-t", "sh", "-c", "echo started; sleep 100 # %s" % tag],
                         cwd=mnt.mountpoint, env=service.env(), stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True)
    out = b""
    deadline = time.time() + 30
    while b"started" not in out and time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            out += os.read(master, 4096)
    assert b"started" in out
    assert termios.tcgetattr(slave) != before   # raw now
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    assert termios.tcgetattr(slave) == before
    os.close(master)
    os.close(slave)
    assert wait_remote_gone(service, container, tag)


def test_dash_T_never_uses_a_pty(service, mnt):
    p = mbx(service, ["-T", "--mode", "managed", "sh", "-c", "tty || true"], mnt.mountpoint)
    assert p.stdout == b"not a tty\n"


def test_managed_arguments_that_are_not_utf8(service, mnt):
    args = [b"\xff\xfe", b"caf\xe9", b"ok\n\n"]
    p = mbx(service, [b"--mode", b"managed", b"printf", b"%s|"] + args, mnt.mountpoint)
    assert p.returncode == 0, p.stderr
    # managed output is decoded as UTF-8 by the service
    assert p.stdout == b"\xef\xbf\xbd\xef\xbf\xbd|caf\xef\xbf\xbd|ok\n\n|"


def test_tty_window_size_follows_sigwinch(service, mnt):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    # the remote side waits (up to 30 s) for the new size to arrive: the
    # resize request and any keystroke travel independently
    script = ('stty size; echo started; i=0; '
              'while [ "$(stty size)" = "24 80" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; '
              'stty size')
    p = subprocess.Popen([mbtest.MBEXEC, "-t", "sh", "-c", script],
                         cwd=mnt.mountpoint, env=service.env(), stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True)
    out = b""
    deadline = time.time() + 30
    try:
        while b"started" not in out and time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                out += os.read(master, 4096)
        assert b"24 80" in out, out
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        p.send_signal(signal.SIGWINCH)   # the pty is not mbexec's controlling tty
        deadline = time.time() + 60
        while p.poll() is None and time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                out += os.read(master, 4096)
        assert p.wait(timeout=30) == 0, out
        os.close(slave)
        slave = None
        out += mbtest.read_pty_to_end(master)
        assert b"40 120" in out, out
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
        if slave is not None:
            os.close(slave)


def test_dash_i_from_a_terminal_needs_no_managed_job(service, mnt):
    jobs = jobs_created(service)
    status, out, before, after = run_in_pty(
        service, ["-i", "--json", "cat"], mnt.mountpoint,
        keys=[(b"", b"abc\n"), (b"abc", b"\x04")])
    assert status == 0, out
    doc = json.loads(out[out.index(b"{"):].replace(b"\r\n", b"\n"))
    assert doc["strategy"] == "exec" and doc["exitCode"] == 0
    assert jobs_created(service) == jobs
    assert doc["stdout"] == "abc\n"
    assert after == before


def test_per_read_event_cap_is_not_called_a_byte_limit():
    # the d93e920 runtime stops a job after ~510 output events, however
    # little they hold: 1200 writes of 6 bytes are 7 KB, not "1 MiB" (a
    # loaded machine reads several writes at once: twice the cap leaves
    # room for that)
    from test_mbexec_helpers import fake_mount
    svc = mbtest.Service(extra_args=["--output-events", "per-read"])
    try:
        ident = svc.create_container()
        d = fake_mount(svc, ident)
        p = mbx(svc, ["--mode", "managed", "sh", "-c",
                      "i=0; while [ $i -lt 1200 ]; do echo $i; sleep 0.01; i=$((i + 1)); done"], d)
        err = p.stderr.decode()
        assert p.returncode == 255, err
        assert "1 MiB" not in err, err
        assert "limit on output events" in err and "without --mode managed" in err, err
        svc.delete_container(ident)
    finally:
        svc.stop()
