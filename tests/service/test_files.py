# File GET/PUT (§4.2, §4.3): binary round trip, size caps, modes, atomic
# replacement, errors, headers, and that commands see the same files.

import os

MIB = 1048576


def test_binary_round_trip_and_headers(container):
    data = bytes(range(256)) * 64
    r = container.put("/workspace/bin.dat", data)
    assert r.status == 200 and r.json() == {"path": "/workspace/bin.dat", "size": len(data)}
    r = container.get("/workspace/bin.dat")
    assert r.status == 200 and r.body == data
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"] == "attachment"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["cache-control"] == "no-store"
    assert "etag" not in r.headers and "last-modified" not in r.headers
    r = container.api.get("/containers/files", container.query(path="/workspace/bin.dat"),
                          headers={"Range": "bytes=0-9"})
    assert r.status == 200 and r.body == data


def test_empty_and_limits(container):
    assert container.put("/workspace/empty", b"").json()["size"] == 0
    assert container.get("/workspace/empty").body == b""
    big = os.urandom(MIB)
    assert container.put("/workspace/big", big).status == 200
    assert container.get("/workspace/big").body == big
    r = container.put("/workspace/toobig", big + b"x")
    assert (r.status, r.error) == (413, "file_too_large")
    assert container.get("/workspace/toobig").error == "file_not_found"
    container.exec("head -c %d /dev/zero > /workspace/huge" % (MIB + 1))
    r = container.get("/workspace/huge")
    assert (r.status, r.error) == (413, "file_too_large")


def test_put_body_checked_before_container(api):
    q = {"id": "c9", "createdAt": "2026-01-01T00:00:00.000Z", "path": "/workspace/x"}
    r = api.put("/containers/files", q, b"x" * (MIB + 1))
    assert (r.status, r.error) == (413, "file_too_large")
    r = api.put("/containers/files", q, b"x")
    assert (r.status, r.error) == (409, "container_not_running")


def test_modes(container):
    container.put("/workspace/new", b"1")
    out = container.exec("stat -c %a /workspace/new; chmod 0754 /workspace/new")
    assert out["stdout"].strip() == "600"
    container.put("/workspace/new", b"22")
    out = container.exec("stat -c %a /workspace/new; cat /workspace/new; echo; ls -a /workspace | grep -c mainbrella-file || true")
    assert out["stdout"].split() == ["754", "22", "0"]


def test_put_errors(container):
    container.exec("mkdir /workspace/d; ln -s /workspace/nowhere /workspace/dangling; ln -s d /workspace/dl")
    assert container.put("/workspace/d", b"x").error == "not_regular_file"
    assert container.put("/workspace/dangling", b"x").error == "not_regular_file"
    assert container.put("/workspace/missing/x", b"x").error == "file_not_found"
    assert container.put("/workspace/dl/inside", b"x").status == 200       # parent symlink followed
    assert container.get("/workspace/d/inside").body == b"x"
    assert container.put("/etc/passwd", b"x").error == "file_access_denied"
    assert container.put("/etc/newfile", b"x").error == "file_access_denied"


def test_get_errors(container):
    assert container.get("/workspace/nope").error == "file_not_found"
    assert container.get("/workspace").error == "not_regular_file"
    assert container.get("/dev/null").error == "not_regular_file"
    assert container.get("/etc/shadow").error == "file_access_denied"
    r = container.api.get("/containers/files", container.query(path="/workspace/"))
    assert r.error == "invalid_file_path"
    r = container.api.get("/containers/files", container.query(path="/workspace/../etc"))
    assert r.error == "invalid_file_path"
    r = container.api.get("/containers/files", container.query(path="/"))
    assert r.error == "invalid_file_path"


def test_commands_see_files_and_symlinks_resolve_in_guest(container):
    container.put("/tmp/t.txt", b"in guest tmp")
    container.exec("ln -s /tmp/t.txt /workspace/abs")
    assert container.get("/workspace/abs").body == b"in guest tmp"
    assert container.exec("cat /workspace/abs")["stdout"] == "in guest tmp"
    assert container.put("/workspace/from-put", b"seen").status == 200
    assert container.exec("cat from-put")["stdout"] == "seen"


def test_files_take_pool_slot(container):
    api2 = container.api.fresh()
    import threading
    threads = []
    for _ in range(4):
        a = container.api.fresh()
        t = threading.Thread(target=a.post, args=("/containers/exec", container.q, {"command": "sleep 1.5"}))
        t.start()
        threads.append(t)
    import time
    time.sleep(0.7)
    r = api2.get("/containers/files", container.query(path="/workspace/x"))
    assert (r.status, r.error) == (429, "execution_limit")
    r = api2.put("/containers/files", container.query(path="/workspace/x"), b"x")
    assert (r.status, r.error) == (429, "execution_limit")
    assert container.get("/workspace/x").status in (404, 429)
    for t in threads:
        t.join()
    assert container.get("/workspace/x").error == "file_not_found"     # the refused PUT did nothing
