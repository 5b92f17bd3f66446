"""mbexec's Ctrl-C and SIGTERM while the service stops answering (SIGSTOP of
the local service): they always end it, at once, with the --attach line.
Apart from test_mbexec_lost.py so that the two run side by side."""
import os
import signal
import subprocess
import termios
import time

import pytest

import mbtest
from test_mbexec_helpers import ATTACH_RE, frozen, popen, read_until, started
from test_mbexec_helpers import mnt, where  # noqa: F401 (fixtures)


def started_on_a_pty(service, mnt, rest):
    """mbexec -t of `echo started; REST` on a fresh pty, once it printed
    started: (process, master fd, slave fd, master file, output so far,
    the terminal's attributes before mbexec, which it must restore)."""
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    p = subprocess.Popen([mbtest.MBEXEC, "-t", "sh", "-c", "echo started; " + rest],
                         cwd=mnt.mountpoint, env=service.env(), stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True)
    master_f = os.fdopen(master, "rb", buffering=0)
    out = read_until(master_f, b"started", 60)
    assert b"started" in out, out
    return p, master, slave, master_f, out, before


def test_ctrl_c_twice_ends_it_at_once_when_the_sandbox_is_silent(service, where):
    p = started(service, where, "echo started; sleep 30")
    with frozen(service):
        err = read_until(p.stderr, b"\n", 30)
        assert b"has not answered for" in err, err
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)     # tries to pass it on: no answer
        hint = read_until(p.stderr, b"\n", 10)
        assert b"Ctrl-C again to give up" in hint, hint
        err += hint
        p.send_signal(signal.SIGINT)     # like ssh's ~.
        out, rest = p.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    err += rest
    assert p.returncode == 255, err
    assert elapsed < 10, elapsed
    assert b"gave up on the sandbox, which does not answer (Ctrl-C)" in err, err
    assert ATTACH_RE.search(rest), err


@pytest.mark.parametrize("mode", ["exec", "managed"])
def test_second_ctrl_c_ends_it_when_the_first_gets_no_answer(service, mnt, mode):
    p = popen(service, ["--mode", mode, "sh", "-c", "echo started; sleep 30"], mnt.mountpoint)
    assert read_until(p.stdout, b"started\n", 60) == b"started\n", p.stderr.read()
    with frozen(service):
        p.send_signal(signal.SIGINT)
        time.sleep(1.5)                  # the first has waited over a second
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    assert p.returncode == 255, err
    assert elapsed < 10, elapsed
    assert b"gave up on the sandbox" in err, err
    assert b"cannot signal" not in err, err
    if mode == "exec":
        assert ATTACH_RE.search(err), err


def test_sigterm_ends_it_at_once_when_the_sandbox_is_silent(service, mnt):
    p = started(service, mnt.mountpoint, "echo started; sleep 30")
    with frozen(service):
        err = read_until(p.stderr, b"\n", 30)
        assert b"has not answered for" in err, err
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, rest = p.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    assert p.returncode == 255, err + rest
    assert elapsed < 10, elapsed
    assert b"(SIGTERM)" in rest, rest


def test_ctrl_c_keys_twice_end_a_tty_session_when_the_sandbox_is_silent(service, mnt):
    # in -t, Ctrl-C is a byte for the remote terminal; while the sandbox
    # does not answer it is also the local escape
    p, master, slave, master_f, out, before = started_on_a_pty(service, mnt, "sleep 30")
    try:
        with frozen(service):
            out += read_until(master_f, b"has not answered for", 30)
            assert b"has not answered for" in out, out
            os.write(master, b"\x03")
            out += read_until(master_f, b"Ctrl-C again", 10)
            assert b"Ctrl-C again" in out, out
            t0 = time.monotonic()
            os.write(master, b"\x03")
            status = p.wait(timeout=30)
            elapsed = time.monotonic() - t0
        assert status == 255, out
        assert elapsed < 10, elapsed
        assert termios.tcgetattr(slave) == before   # the terminal is restored
    finally:
        if p.poll() is None:
            p.kill()
        master_f.close()
        os.close(slave)


def test_sigterm_before_the_notice_ends_it_once_the_silence_is_known(service, mnt):
    """A SIGTERM that comes while a poll waits on a service that just
    stopped: mbexec cannot pass it on, and gives up as soon as it knows the
    service is silent, not after its 60 s of patience."""
    p = started(service, mnt.mountpoint, "echo started; sleep 120")
    try:
        with frozen(service):
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=40)
        assert p.returncode == 255, err
        assert b"gave up on the sandbox, which does not answer (SIGTERM)" in err, err
        assert b"Trying" not in err, err     # no promise of more tries
        assert ATTACH_RE.search(err), err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_ctrl_c_key_before_the_notice_counts_as_the_first(service, mnt):
    """-t: a Ctrl-C typed as the service stops goes to the remote terminal,
    which does not answer. Once mbexec knows it is silent, that key counts
    as the first Ctrl-C: the hint comes without another, and the next one
    gives up."""
    p, master, slave, master_f, out, _ = started_on_a_pty(service, mnt, "sleep 120")
    try:
        with frozen(service):
            os.write(master, b"\x03")
            out += read_until(master_f, b"Ctrl-C again", 40)
            assert b"has not answered for" in out and b"Ctrl-C again" in out, out
            os.write(master, b"\x03")
            assert p.wait(timeout=30) == 255, out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        master_f.close()
        os.close(slave)
