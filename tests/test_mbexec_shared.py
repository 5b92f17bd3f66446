"""Many commands, one budget: running commands poll through the mount, so N
of them cost one of the sandbox's 4 operations, and the mount's file
operations and further commands do not wait behind them."""
import json
import os
import socket
import time

import pytest

import mbtest
from test_mbexec_helpers import mbx, module_mount, popen


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


def timed(fn):
    t0 = time.time()
    fn()
    return time.time() - t0


def test_ten_sleeping_commands_leave_the_sandbox_free(service, container, mnt):
    d = mnt.mountpoint
    mbx(service, ["true"], d)
    ps = [popen(service, ["sleep", "30"], d) for _ in range(10)]
    try:
        time.sleep(3)   # all launched, polling
        service.reset_stats()
        began = time.monotonic()
        slow = []
        for i in range(20):
            def op(i=i):
                p = mnt.path("shared%d.txt" % i)
                with open(p, "w") as f:
                    f.write("x" * i)
                os.stat(p)
            t = timed(op)
            if t > 5:
                slow.append(("file", i, t))
        for i in range(5):
            p = []
            t = timed(lambda: p.append(mbx(service, ["true"], d)))
            assert p[0].returncode == 0 and p[0].stderr == b"", p[0].stderr
            if t > 5:
                slow.append(("true", i, t))
        time.sleep(5)
        st = service.stats()
        took = time.monotonic() - began
        # the 10 commands' polls: one shared exec a second or so, not ten
        # (a loaded machine takes longer, with a poll for each second more)
        execs = st["requests"].get("POST /containers/exec", 0)
        assert execs <= 5 + 5 + max(12, int(took) + 2), (took, st["requests"])
        assert slow == [], slow
        assert st["peakConcurrentOps"].get(container["id"], 0) <= 4
    finally:
        for p in ps:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and err == b"", err


def test_fifty_concurrent_commands(service, mnt):
    t0 = time.time()
    ps = [popen(service, ["sh", "-c", "sleep 3; echo done"], mnt.mountpoint) for _ in range(50)]
    for p in ps:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out == b"done\n", err
    print("50 concurrent mbexec sleep 3: %.1f s" % (time.time() - t0))


def test_another_user_cannot_use_the_mount_socket(service, mnt):
    with open(mnt.path(".mainbrella")) as f:
        name = json.load(f)["agent"]
    assert name
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0" + name)
            body = json.dumps({"op": "poll", "prelude": "", "setup": "", "ready": "true",
                               "body": "id", "waitMs": 0}).encode()
            try:
                s.sendall(len(body).to_bytes(4, "big") + body)
                code = 0 if s.recv(4) == b"" else 1
            except OSError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "another uid got an answer from the mount's socket"
    assert "refused a connection from uid 65534" in mnt.log()
