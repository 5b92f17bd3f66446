"""mbexec and a service that stops answering (SIGSTOP of the local
service): it says so within a few seconds, keeps trying for the time its
man page gives ($MBEXEC_LOST_SECONDS here, to keep the tests short), then
exits 255 with the --attach line (Ctrl-C and SIGTERM: test_mbexec_lost_keys.py)."""
import signal
import time

from test_mbexec_helpers import (ATTACH_RE, fake_mount, frozen, mbx, popen, read_until, rmtree,
                                 started, unique)
from test_mbexec_helpers import mnt, where  # noqa: F401 (fixtures)


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


def test_the_notice_comes_within_its_documented_time(service, where):
    """mbexec(1): a service that stops answering is said within 5 s. A
    quiet command's poll waits up to 15 s on the guest, so the silence is
    not counted from the poll: a probe of the service is (the bound here
    leaves the noisy machine 7 s)."""
    p = started(service, where, "echo started; sleep 120")
    try:
        with frozen(service):
            t0 = time.monotonic()
            err = read_until(p.stderr, b"has not answered for", 40)
            elapsed = time.monotonic() - t0
            assert b"has not answered for 5 s" in err, err
            assert elapsed < 12, elapsed
    finally:
        p.kill()
        p.wait()


def test_a_probe_answered_with_an_error_is_no_silence(service, mnt):
    """The probe's GET /containers fails with a 500: the service answered,
    so nothing is said, and a SIGTERM ends the command as usual (143),
    not by giving up on a service that is there."""
    service.fault(route="GET /containers", count=100000, status=500, error="internal_error")
    try:
        p = started(service, mnt.mountpoint, "echo started; sleep 9; echo done")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out == b"done\n", err
        assert b"has not answered" not in err, err
        p = started(service, mnt.mountpoint, "echo started; sleep 60")
        read_until(p.stderr, b"has not answered", 8)     # none comes
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 143, err
        assert b"gave up" not in err, err
    finally:
        service.clear_faults()


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
