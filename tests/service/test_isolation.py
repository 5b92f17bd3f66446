# Guest isolation: private /workspace and /tmp per generation, guest user,
# stop kills every guest process (detached ones too), export, and service exit.

import gzip
import io
import os
import tarfile
import time

from svchelpers import create_container, wait_for


def _host_procs(marker):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def test_containers_do_not_see_each_other(api):
    a = create_container(api)
    b = create_container(api)
    try:
        a.put("/workspace/secret", b"a-only")
        a.put("/tmp/tmp-secret", b"a-tmp")
        assert b.get("/workspace/secret").error == "file_not_found"
        assert b.get("/tmp/tmp-secret").error == "file_not_found"
        assert b.exec("ls -A /workspace; ls -A /tmp")["stdout"] == ""
        out = a.exec("ls / >/dev/null; cat /workspace/secret; ps -e -o pid= | wc -l")
        assert out["stdout"].startswith("a-only")
        assert int(out["stdout"][len("a-only"):].strip()) < 10          # own PID namespace
    finally:
        a.delete()
        b.delete()


def test_new_generation_starts_empty(api):
    a = create_container(api)
    a.put("/workspace/keep", b"x")
    a.delete()
    b = create_container(api)
    assert b.id == a.id
    assert b.get("/workspace/keep").error == "file_not_found"
    b.delete()


def test_stop_kills_all_guest_processes(api):
    c = create_container(api)
    marker = "4242.123"
    c.exec("setsid sleep %s >/dev/null 2>&1 </dev/null & nohup sleep %s >/dev/null 2>&1 &" % (marker, marker))
    wait_for(lambda: len(_host_procs(marker)) == 2)
    c.delete()
    wait_for(lambda: not _host_procs(marker), timeout=5)


def test_guest_user_and_permissions(container):
    out = container.exec("id -u; id -g; stat -c '%u %a' /workspace /tmp; touch /etc/nope 2>&1 || true")
    lines = out["stdout"].splitlines()
    assert lines[:4] == ["1000", "1000", "1000 755", "1000 1777"]
    assert "Permission denied" in lines[4]


def test_export(container):
    container.put("/workspace/a.txt", b"alpha")
    container.exec("mkdir -p /workspace/d && echo beta > /workspace/d/b.txt")
    r = container.api.get("/containers/export", container.q)
    assert r.status == 200
    assert r.headers["content-type"] == "application/gzip"
    assert r.headers["content-disposition"] == 'attachment; filename="workspace.tar.gz"'
    with tarfile.open(fileobj=io.BytesIO(r.body), mode="r:gz") as tar:
        names = tar.getnames()
        assert "./a.txt" in names and "./d/b.txt" in names
        assert tar.extractfile("./d/b.txt").read() == b"beta\n"
    assert gzip.decompress(r.body)
    assert container.exec("ls -A /tmp")["stdout"] == ""             # the archive was removed
    container.exec("head -c 20000000 /dev/urandom > /workspace/big.bin")
    r = container.api.get("/containers/export", container.q)
    assert (r.status, r.error) == (413, "workspace_export_too_large")


def test_no_internet_container(api):
    c = create_container(api, internet=False)
    try:
        out = c.exec("cat /sys/class/net/*/operstate 2>/dev/null | wc -l; ls /sys/class/net")
        assert out["exitCode"] == 0
        doc = [x for x in api.get("/containers").json()["containers"] if x["id"] == c.id][0]
        assert doc["internet"] is False
    finally:
        c.delete()


def test_service_exit_stops_everything(start_service):
    svc = start_service()
    c = create_container(svc.api)
    marker = "4343.321"
    c.exec("setsid sleep %s >/dev/null 2>&1 </dev/null &" % marker)
    svc.api.post("/containers/executions", c.q, {"command": "sleep 4343.322"}, headers={"Idempotency-Key": "x"})
    wait_for(lambda: _host_procs(marker) and _host_procs("4343.322"))
    rc, log = svc.stop()
    assert rc == 0, log
    time.sleep(0.2)
    assert not _host_procs(marker) and not _host_procs("4343.322")
    assert not os.listdir(os.path.join(svc.state, "slots", c.id))
