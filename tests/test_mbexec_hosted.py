"""mbexec on the hosted-like runtime: PID 1 never reaps, an exec answers
only at EOF of its pipes, and -t/-i run without managed jobs."""
import json
import os
import signal
import threading
import time

import pytest

import mbtest
from test_mbexec_helpers import (fake_mount, jobs_created, mbx, module_mount, popen, rmtree,
                                 run_in_pty, unique)


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def zombies(service, ident):
    return service.stats().get("zombies", {}).get(ident["id"], 0)


def test_true_is_one_short_exec(service, container):
    d = fake_mount(service, container)
    try:
        mbx(service, ["true"], d)   # installs the guest scripts
        service.reset_stats()
        p = mbx(service, ["true"], d)
        assert p.returncode == 0, p.stderr
        st = service.stats()
        assert st["requests"] == {"POST /containers/exec": 1}, st["requests"]
        # the exec answered without waiting for its timeout: no helper the
        # launch started held its stdout or stderr
        assert st["statuses"]["POST /containers/exec"] == {"200": 1}
        p = mbx(service, ["--json", "true"], d)
        assert p.returncode == 0
    finally:
        rmtree(d)


def test_a_fresh_sandbox_runs_the_first_command_in_one_request(service):
    ident = service.create_container()
    d = fake_mount(service, ident)
    try:
        service.reset_stats()
        p = mbx(service, ["sh", "-c", "echo first"], d)
        assert p.returncode == 0 and p.stdout == b"first\n", p.stderr
        assert service.stats()["requests"] == {"POST /containers/exec": 1}
    finally:
        rmtree(d)
        service.delete_container(ident)


def ctrl_c(service, d, tag):
    p = popen(service, ["sh", "-c", "echo started; sleep 30 # %s" % tag], d)
    p.stdout.readline()
    p.send_signal(signal.SIGINT)
    return p.wait(timeout=60)


@pytest.mark.timeout(600)       # a thousand commands: about 60 s, 3x that under ASan
def test_no_zombies_after_a_thousand_commands_and_file_operations(service, container, mnt):
    """Every kind of command, four at a time, then 1,000 file operations:
    the sandbox keeps at most 5 zombies more than before."""
    d = mnt.mountpoint
    mbx(service, ["true"], d)
    before = zombies(service, container)
    kinds = []
    kinds += [["true"]] * 640
    kinds += [["sh", "-c", "echo a; sleep 0.3; echo b >&2; sleep 0.3; echo c"]] * 40
    kinds += [["--timeout", "1", "sleep", "5"]] * 30
    kinds += [["sh", "-c", "(sleep 0.2; echo sub) | cat"]] * 30
    kinds += ["stdin"] * 130
    kinds += ["tty"] * 100
    kinds += ["ctrl-c"] * 30
    failures = []
    lock = threading.Lock()

    def one(k):
        if k == "stdin":
            p = mbx(service, ["wc", "-c"], d, input=b"x" * 20000)
            ok = p.returncode == 0 and p.stdout.strip() == b"20000"
        elif k == "tty":
            status, out, _, _ = run_in_pty(service, ["-t", "sh", "-c", "tty; exit 3"], d)
            ok = status == 3 and b"/dev/pts/" in out
        elif k == "ctrl-c":
            ok = ctrl_c(service, d, unique("zc")) == 130
        else:
            p = mbx(service, k, d)
            ok = p.returncode == (124 if k[0] == "--timeout" else 0)
        if not ok:
            with lock:
                failures.append(k)

    def worker(items):
        for k in items:
            one(k)

    threads = [threading.Thread(target=worker, args=(kinds[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    for i in range(250):
        p = mnt.path("z%d.txt" % i)
        with open(p, "w") as f:
            f.write("x" * i)
        os.chmod(p, 0o600)
        os.utime(p, (1000000000, 1000000000))
        os.rename(p, mnt.path("y%d.txt" % i))
    for i in range(250):
        os.unlink(mnt.path("y%d.txt" % i))
    assert zombies(service, container) <= before + 5


def test_forty_tty_sessions_need_no_managed_job(service, mnt):
    before = jobs_created(service)
    for i in range(40):
        status, out, before_attr, after_attr = run_in_pty(
            service, ["-t", "sh", "-c", "echo s%d; tty" % i], mnt.mountpoint)
        assert status == 0, out
        assert b"s%d" % i in out and b"/dev/pts/" in out, out
        assert after_attr == before_attr
    assert jobs_created(service) == before


def test_a_tty_session_of_5000_short_writes(service, mnt):
    script = 'i=0; while [ $i -lt 5000 ]; do echo "line $i"; i=$((i + 1)); done'
    status, out, _, _ = run_in_pty(service, ["-t", "sh", "-c", script], mnt.mountpoint,
                                   timeout=120)
    assert status == 0
    lines = out.replace(b"\r\n", b"\n").split(b"\n")
    assert [b"line %d" % i for i in range(5000)] == [x for x in lines if x.startswith(b"line ")]


def test_tty_ctrl_c_that_the_program_handles(service, mnt):
    status, out, before, after = run_in_pty(
        service, ["-t", "sh", "-c", 'trap "echo caught" INT; echo ready; sleep 5; exit 7'],
        mnt.mountpoint, keys=[(b"ready", b"\x03")])
    assert status == 7, out
    assert b"caught" in out
    assert after == before


def test_deadline_note_from_the_control_file(service, container):
    d = fake_mount(service, container)
    try:
        ctl = os.path.join(d, ".mainbrella")
        with open(ctl) as f:
            doc = json.load(f)
        soon = time.gmtime(time.time() + 300)
        doc["expiresAt"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", soon)
        with open(ctl, "w") as f:
            json.dump(doc, f)
        p = mbx(service, ["true"], d)
        assert p.returncode == 0
        err = p.stderr.decode()
        assert "ends in 5 min" in err and container["id"] in err, err
        doc["expiresAt"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + 3000))
        with open(ctl, "w") as f:
            json.dump(doc, f)
        p = mbx(service, ["true"], d)
        assert p.returncode == 0 and p.stderr == b"", p.stderr
    finally:
        rmtree(d)


def test_a_command_whose_json_body_would_pass_32k_travels_as_a_file(service, container):
    d = fake_mount(service, container)
    try:
        # 7,000 bytes that fit the 16 KiB command with the launch around
        # them, but that JSON escapes to 42,000 (\u0001 each)
        arg = "\x01" * 7000
        service.reset_stats()
        p = mbx(service, ["printf", "%s", arg], d)
        assert p.returncode == 0, p.stderr
        assert p.stdout == arg.encode()
        st = service.stats()
        assert "413" not in json.dumps(st["statuses"]), st["statuses"]
        assert st["requests"].get("PUT /containers/files") == 1, st["requests"]
    finally:
        rmtree(d)
