"""mbexec and a service that stops answering (SIGSTOP of the local
service): it says so within a few seconds, keeps trying for the time its
man page gives ($MBEXEC_LOST_SECONDS here, to keep the tests short), then
exits 255 with the --attach line; Ctrl-C and SIGTERM always end it."""
import contextlib
import os
import re
import select
import signal
import subprocess
import termios
import time

import pytest

import mbtest
from test_mbexec_helpers import fake_mount, mbx, module_mount, popen, rmtree, unique

ATTACH_RE = re.compile(rb"mbexec --attach ([0-9a-f]{16})")


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


@pytest.fixture(params=["mount", "direct"])
def where(request, service, container, mnt):
    """The mount's directory (polls through its socket), or a plain
    directory with a control file (mbexec polls by itself)."""
    if request.param == "mount":
        yield mnt.mountpoint
    else:
        d = fake_mount(service, container)
        yield d
        rmtree(d)


@contextlib.contextmanager
def frozen(service):
    os.kill(service.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(service.proc.pid, signal.SIGCONT)


def read_until(f, needle, timeout):
    """Bytes read from f until needle is among them, f ends, or timeout."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([f], [], [], left)[0]:
            break
        chunk = os.read(f.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
    return buf


def started(service, cwd, script, env=None):
    p = popen(service, ["sh", "-c", script], cwd, env=service.env(**(env or {})))
    assert read_until(p.stdout, b"started\n", 60) == b"started\n", p.stderr.read()
    return p


def test_frozen_service_is_said_at_once_then_255_then_attach(service, where):
    tag = unique("lost")
    p = started(service, where, "echo started; sleep 20; echo done; exit 3 # %s" % tag,
                env={"MBEXEC_LOST_SECONDS": "8"})
    with frozen(service):
        t0 = time.monotonic()
        err = read_until(p.stderr, b"\n", 30)
        # said well before the end, once, with the way back
        assert b"has not answered for" in err and b"may still be running" in err, err
        assert p.poll() is None, err
        m = ATTACH_RE.search(err)
        assert m, err
        out, rest = p.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    err += rest
    assert p.returncode == 255, err
    assert 6 <= elapsed < 40, elapsed   # kept trying about 8 s, then ended
    assert err.count(b"has not answered for") == 1, err
    assert b"lost contact with the command: the sandbox did not answer for 8 s" in err, err
    assert b"cannot run the command" not in err, err
    # the command was running all along: --attach follows it to its end
    a = mbx(service, ["--attach", m.group(1).decode()], where)
    assert a.returncode == 3, a.stderr
    assert a.stdout == b"done\n", a.stdout


def test_service_back_in_time_the_command_just_finishes(service, where):
    p = started(service, where, "echo started; sleep 7; echo done; exit 4")
    with frozen(service):
        err = read_until(p.stderr, b"\n", 30)
        assert b"has not answered for" in err, err
    out, rest = p.communicate(timeout=60)
    err += rest
    assert p.returncode == 4, err
    assert out == b"done\n"
    assert b"the sandbox answers again" in err, err


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


def test_frozen_at_the_launch_says_it_may_have_started(service, container):
    d = fake_mount(service, container)
    try:
        p = popen(service, ["echo", "hi"], d, env=service.env(MBEXEC_LOST_SECONDS="6"))
        with frozen(service):
            err = read_until(p.stderr, b"\n", 30)
            assert b"has not answered for" in err and b"may have started" in err, err
            out, rest = p.communicate(timeout=60)
        err += rest
        assert p.returncode == 255, err
        assert b"the sandbox did not answer for 6 s; the command may have started" in err, err.decode()
        assert ATTACH_RE.search(rest), err
    finally:
        rmtree(d)


def test_ctrl_c_keys_twice_end_a_tty_session_when_the_sandbox_is_silent(service, mnt):
    # in -t, Ctrl-C is a byte for the remote terminal; while the sandbox
    # does not answer it is also the local escape
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    p = subprocess.Popen([mbtest.MBEXEC, "-t", "sh", "-c", "echo started; sleep 30"],
                         cwd=mnt.mountpoint, env=service.env(), stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True)
    master_f = os.fdopen(master, "rb", buffering=0)
    try:
        out = read_until(master_f, b"started", 60)
        assert b"started" in out, out
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
