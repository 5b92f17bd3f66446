# Guest isolation (§9.1): the default node image and the catalog working
# directories, guest root mapped to an unprivileged host uid range, the
# per-generation root filesystem (read-only host system directories, private
# /root, /tmp, /dev, /proc), stop kills every guest process, export, service exit.

import gzip
import io
import os
import tarfile
import time

from svchelpers import create_container, host_procs, slot_index, wait_for

UID_BASE, UID_RANGE = 100000, 65536


def _listed(api, cid):
    return [x for x in api.get("/containers").json()["containers"] if x["id"] == cid][0]


def test_default_image_is_node_working_in_root(node_container):
    c = node_container
    assert _listed(c.api, c.id)["catalogId"] == "node"
    out = c.exec("pwd; echo $HOME; id -u; id -g; test -e /workspace && echo ws || echo no-ws; "
                 "stat -c '%u %g %a' / /root /tmp")
    assert out["stdout"].splitlines() == ["/root", "/root", "0", "0", "no-ws", "0 0 755", "0 0 700", "0 0 1777"]
    r = c.api.get("/containers/export", c.q)
    assert (r.status, r.error) == (503, "workspace_export_unavailable")     # nothing to archive yet
    r = c.api.post("/containers/files/mkdir", c.q, {"path": "/workspace", "mode": "0755"})
    assert r.status == 200, r
    st = c.api.get("/containers/files/stat", c.query(path="/workspace")).json()
    assert (st["type"], st["mode"], st["uid"], st["gid"]) == ("directory", "0755", 0, 0)
    assert c.exec("rmdir /workspace && mkdir /workspace && echo made")["stdout"] == "made\n"
    assert c.put("/workspace/f", b"x").status == 200
    entry = c.api.get("/containers/files/list", c.query(path="/workspace")).json()["entries"][0]
    assert (entry["name"], entry["mode"], entry["uid"], entry["gid"]) == ("f", "0600", 0, 0)


def test_catalog_working_directories(api):
    for catalog in ("python", "rust", "go", "devops"):
        c = create_container(api, catalogId=catalog)
        try:
            out = c.exec("pwd; echo $HOME; stat -c '%u %g %a' /workspace")
            assert out["stdout"].splitlines() == ["/workspace", "/root", "0 0 755"], catalog
        finally:
            c.delete()


def test_guest_root_is_an_unprivileged_host_uid(container):
    base = UID_BASE + slot_index(container.id) * UID_RANGE
    marker = "4250.125"
    out = container.exec("cat /proc/self/uid_map /proc/self/gid_map; sleep %s >/dev/null 2>&1 &" % marker)
    assert out["stdout"].split() == ["0", str(base), str(UID_RANGE)] * 2
    pid = wait_for(lambda: host_procs(marker))[0]
    with open("/proc/%d/status" % pid) as f:
        ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid:", "Gid:"))}
    assert ids == {"Uid": [str(base)] * 4, "Gid": [str(base)] * 4}


def test_host_files_are_out_of_reach(container):
    host_tmp = "/tmp/mbsvc-host-only-%d" % os.getpid()
    with open(host_tmp, "w") as f:
        f.write("host")
    try:
        with open("/etc/hostname", "rb") as f:
            before = f.read()
        out = container.exec("touch /usr/x /etc/x; echo y >> /etc/hostname; cat /etc/shadow; "
                             "mount -t tmpfs none /mnt; ls %s; grep -c ' /usr ro,' /proc/self/mountinfo" % host_tmp)
        err = out["stderr"]
        assert err.count("Read-only file system") == 2 and "cannot create /etc/hostname" in err
        assert "shadow: Permission denied" in err and "mount: /mnt: permission denied" in err
        assert "No such file" in err and out["stdout"] == "1\n"
        with open("/etc/hostname", "rb") as f:
            assert f.read() == before
        assert container.get(host_tmp).error == "file_not_found"
        assert container.put("/etc/hostname", b"x").error == "file_access_denied"
    finally:
        os.unlink(host_tmp)


def test_dev_proc_and_pty(container):
    out = container.exec("ls /dev | tr '\\n' ' '; echo; script -qfec 'tty; id -u' /dev/null; "
                         "head -c 4 /dev/urandom | wc -c; ps -e -o pid= | wc -l")
    lines = out["stdout"].split("\n")
    assert set(lines[0].split()) >= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd"}
    assert lines[1:3] == ["/dev/pts/0\r", "0\r"]
    assert lines[3] == "4" and int(lines[4]) < 10                      # own PID namespace


def test_containers_do_not_see_each_other(api):
    a = create_container(api, catalogId="python")
    b = create_container(api, catalogId="python")
    try:
        a.put("/workspace/secret", b"a-only")
        a.put("/tmp/tmp-secret", b"a-tmp")
        a.put("/root/home-secret", b"a-root")
        assert b.get("/workspace/secret").error == "file_not_found"
        assert b.get("/tmp/tmp-secret").error == "file_not_found"
        assert b.get("/root/home-secret").error == "file_not_found"
        assert b.exec("ls -A /workspace /tmp /root")["stdout"] == "/root:\n\n/tmp:\n\n/workspace:\n"
    finally:
        a.delete()
        b.delete()


def test_new_generation_starts_empty(api):
    a = create_container(api, catalogId="python")
    a.put("/workspace/keep", b"x")
    a.put("/root/keep", b"x")
    a.delete()
    b = create_container(api, catalogId="python")
    assert b.id == a.id
    assert b.get("/workspace/keep").error == "file_not_found"
    assert b.get("/root/keep").error == "file_not_found"
    b.delete()


def test_stop_kills_all_guest_processes(api):
    c = create_container(api)
    marker = "4242.123"
    c.exec("setsid sleep %s >/dev/null 2>&1 </dev/null & nohup sleep %s >/dev/null 2>&1 &" % (marker, marker))
    wait_for(lambda: len(host_procs(marker)) == 2)
    c.delete()
    wait_for(lambda: not host_procs(marker), timeout=5)


def test_guest_uid_flag(start_service):
    svc = start_service("--guest-uid", "1000", "--default-catalog", "python")
    c = create_container(svc.api)
    out = c.exec("id -u; id -g; pwd; echo $HOME; stat -c '%u %g' /workspace; touch /root/x 2>&1 || true")
    lines = out["stdout"].splitlines()
    assert lines[:5] == ["1000", "1000", "/workspace", "/workspace", "1000 1000"]
    assert "Permission denied" in lines[5]
    c.put("/workspace/f", b"x")
    st = svc.api.get("/containers/files/stat", c.query(path="/workspace/f")).json()
    assert (st["uid"], st["gid"]) == (1000, 1000)
    assert svc.api.post("/containers/files/mkdir", c.q, {"path": "/opt2"}).error == "file_access_denied"


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
        assert tar.getmember("./a.txt").uid == 0
    assert gzip.decompress(r.body)
    assert container.exec("ls -A /tmp")["stdout"] == ""             # the archive was removed
    container.exec("head -c 20000000 /dev/urandom > /workspace/big.bin")
    r = container.api.get("/containers/export", container.q)
    assert (r.status, r.error) == (413, "workspace_export_too_large")


def test_no_internet_container(api):
    c = create_container(api, internet=False)
    try:
        out = c.exec("ls /sys/class/net; cat /sys/class/net/lo/operstate")
        assert out["exitCode"] == 0 and out["stdout"].split()[0] == "lo" and len(out["stdout"].split()) == 2
        assert _listed(api, c.id)["internet"] is False
    finally:
        c.delete()


def test_service_exit_stops_everything(start_service):
    svc = start_service()
    c = create_container(svc.api)
    marker = "4343.321"
    c.exec("setsid sleep %s >/dev/null 2>&1 </dev/null &" % marker)
    svc.api.post("/containers/executions", c.q, {"command": "sleep 4343.322"}, headers={"Idempotency-Key": "x"})
    wait_for(lambda: host_procs(marker) and host_procs("4343.322"))
    rc, log = svc.stop()
    assert rc == 0, log
    time.sleep(0.2)
    assert not host_procs(marker) and not host_procs("4343.322")
    assert not os.listdir(os.path.join(svc.state, "slots", c.id))
