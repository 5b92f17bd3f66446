# Metadata routes (§4.4-4.6, §9.5): list, stat, mkdir, remove, move, chmod,
# their validation (invalid_request), their error codes and the listing race.

import re

from svchelpers import create_container

ISO_S = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$")


def meta(c, op, method="GET", body=None, **query):
    return c.api.request(method, "/containers/files/" + op, c.query(**query), body)


def test_list_sorting_paging_and_entries(container):
    container.exec("cd /workspace && mkdir sub && touch B a .dot Z && ln -s a link && printf 12345 > a")
    r = meta(container, "list", path="/workspace")
    assert r.status == 200
    doc = r.json()
    names = [e["name"] for e in doc["entries"]]
    assert names == sorted(names, key=lambda n: n.encode())
    assert names == [".dot", "B", "Z", "a", "link", "sub"]
    assert doc["nextOffset"] is None and doc["path"] == "/workspace"
    by = {e["name"]: e for e in doc["entries"]}
    assert by["a"]["type"] == "file" and by["a"]["size"] == 5 and by["a"]["path"] == "/workspace/a"
    assert by["sub"]["type"] == "directory" and by["sub"]["mode"] == "0755"
    assert by["link"]["type"] == "symlink" and by["link"]["linkTarget"] == "a" and by["link"]["size"] == 1
    assert "linkTarget" not in by["a"]
    assert (by["a"]["uid"], by["a"]["gid"]) == (0, 0) and ISO_S.match(by["a"]["modifiedAt"])
    page = meta(container, "list", path="/workspace", limit="2", offset="1").json()
    assert [e["name"] for e in page["entries"]] == ["B", "Z"] and page["nextOffset"] == 3
    last = meta(container, "list", path="/workspace", limit="2", offset="4").json()
    assert last["nextOffset"] is None
    root = meta(container, "list", path="/").json()
    assert any(e["path"] == "/workspace" and e["type"] == "directory" for e in root["entries"])
    tmp = meta(container, "stat", path="/tmp").json()
    assert tmp["mode"] == "1777"


def test_list_errors(container):
    container.exec("touch /workspace/f; mkdir -m 000 /workspace/closed; ln -s /workspace /workspace/wl")
    assert meta(container, "list", path="/workspace/nope").error == "file_not_found"
    assert meta(container, "list", path="/workspace/f").error == "not_directory"
    assert meta(container, "list", path="/workspace/closed").status == 200        # guest root reads it anyway
    assert meta(container, "list", path="/proc/1/fd").error == "file_access_denied"   # PID 1 is not guest root
    assert meta(container, "list", path="/workspace/wl").status == 200
    for bad in ({"limit": "0"}, {"limit": "1001"}, {"limit": "-1"}, {"offset": "1000001"}, {"limit": "1.0"}):
        assert meta(container, "list", path="/workspace", **bad).error == "invalid_request"
    assert meta(container, "list", path="/workspace/").error == "invalid_request"


def test_unsupported_file_name(container):
    container.exec("touch /workspace/ok; touch \"/workspace/bad$(printf '\\377')\"")
    r = meta(container, "list", path="/workspace")
    assert (r.status, r.error) == (409, "unsupported_file_name")
    r = container.api.get("/containers/files/stat", "id=%s&createdAt=%s&path=/workspace/bad%%FF"
                          % (container.id, container.created_at))
    assert r.error == "invalid_request"


def test_stat(container):
    container.exec("printf abc > /workspace/t; ln -s t /workspace/l; ln -s /nowhere /workspace/dang")
    st = meta(container, "stat", path="/workspace/l").json()
    assert st["type"] == "symlink" and st["linkTarget"] == "t" and st["name"] == "l"
    st = meta(container, "stat", path="/workspace/l", followSymlinks="true").json()
    assert st["type"] == "file" and st["size"] == 3 and "linkTarget" not in st and st["path"] == "/workspace/l"
    assert meta(container, "stat", path="/workspace/dang").json()["type"] == "symlink"
    assert meta(container, "stat", path="/workspace/dang", followSymlinks="true").error == "file_not_found"
    assert meta(container, "stat", path="/").json()["name"] == "/"
    assert meta(container, "stat", path="/workspace/t", followSymlinks="yes").error == "invalid_request"


def test_mkdir(container):
    r = meta(container, "mkdir", "POST", {"path": "/workspace/m"})
    assert r.status == 200 and r.json() == {"path": "/workspace/m", "ok": True}
    assert meta(container, "stat", path="/workspace/m").json()["mode"] == "0700"
    assert meta(container, "mkdir", "POST", {"path": "/workspace/m"}).error == "file_exists"
    assert meta(container, "mkdir", "POST", {"path": "/workspace/m", "recursive": True}).status == 200
    assert meta(container, "mkdir", "POST", {"path": "/workspace/a/b/c"}).error == "file_not_found"
    r = meta(container, "mkdir", "POST", {"path": "/workspace/a/b/c", "recursive": True, "mode": "0750"})
    assert r.status == 200
    assert meta(container, "stat", path="/workspace/a/b/c").json()["mode"] == "0750"
    assert meta(container, "stat", path="/workspace/a").json()["mode"] == "0755"
    container.exec("touch /workspace/file; ln -s /workspace/m /workspace/ml")
    assert meta(container, "mkdir", "POST", {"path": "/workspace/ml", "recursive": True}).error == "file_exists"
    assert meta(container, "mkdir", "POST", {"path": "/workspace/file/x", "recursive": True}).error == \
        "file_access_denied"
    assert meta(container, "mkdir", "POST", {"path": "/workspace/file/x"}).error == "file_not_found"
    for bad in ({"path": "/workspace/z", "mode": "755"}, {"path": "/workspace/z", "mode": "04755"},
                {"path": "/workspace/z", "extra": 1}, {"path": "/"}, {"path": "/workspace/z", "recursive": "no"},
                {}):
        assert meta(container, "mkdir", "POST", bad).error == "invalid_request", bad
    assert meta(container, "mkdir", "POST", {"path": "/etc/x"}).error == "file_access_denied"


def test_remove(container):
    container.exec("cd /workspace && mkdir -p d/e && touch d/e/f && mkdir empty && touch g && "
                   "ln -s d dl && mkdir -p ro/x && chmod 555 ro")
    assert meta(container, "remove", "DELETE", path="/workspace/d").error == "directory_not_empty"
    assert meta(container, "remove", "DELETE", path="/workspace/ro/x").status == 200   # root ignores 0555
    assert meta(container, "remove", "DELETE", path="/proc/1/environ").error == "file_access_denied"
    assert meta(container, "remove", "DELETE", path="/workspace/dl").status == 200
    assert meta(container, "stat", path="/workspace/d/e/f").status == 200       # link target untouched
    assert meta(container, "remove", "DELETE", path="/workspace/empty").status == 200
    r = meta(container, "remove", "DELETE", path="/workspace/d", recursive="true")
    assert r.json() == {"path": "/workspace/d", "ok": True}
    assert meta(container, "remove", "DELETE", path="/workspace/d").error == "file_not_found"
    assert meta(container, "remove", "DELETE", path="/workspace/g").status == 200
    assert meta(container, "remove", "DELETE", path="/").error == "invalid_request"


def test_move(container):
    container.exec("cd /workspace && echo 1 > a && echo 2 > b && mkdir dir && ln -s nowhere dang")
    r = meta(container, "move", "POST", {"path": "/workspace/a", "destination": "/workspace/c"})
    assert r.json() == {"path": "/workspace/a", "destination": "/workspace/c", "ok": True}
    assert meta(container, "move", "POST", {"path": "/workspace/c", "destination": "/workspace/b"}).error == \
        "file_exists"
    assert meta(container, "move", "POST", {"path": "/workspace/c", "destination": "/workspace/dang"}).error == \
        "file_exists"
    assert container.get("/workspace/b").body == b"2\n"
    assert meta(container, "move", "POST", {"path": "/workspace/nope", "destination": "/workspace/x"}).error == \
        "file_not_found"
    assert meta(container, "move", "POST", {"path": "/workspace/c", "destination": "/workspace/no/x"}).error == \
        "file_not_found"
    assert meta(container, "move", "POST", {"path": "/workspace/dir", "destination": "/workspace/dir/in"}).error == \
        "invalid_request"
    assert meta(container, "move", "POST", {"path": "/workspace/c", "destination": "/workspace/c"}).error == \
        "invalid_request"
    # across mounts (/workspace -> /tmp) and symlinks move as links
    assert meta(container, "move", "POST", {"path": "/workspace/c", "destination": "/tmp/c"}).status == 200
    assert container.get("/tmp/c").body == b"1\n"
    assert meta(container, "move", "POST", {"path": "/workspace/dang", "destination": "/workspace/dang2"}).status == 200
    assert meta(container, "stat", path="/workspace/dang2").json()["linkTarget"] == "nowhere"


def test_chmod(container):
    container.exec("touch /workspace/f; ln -s f /workspace/l")
    r = meta(container, "chmod", "PATCH", {"mode": "0640"}, path="/workspace/f")
    assert r.json() == {"path": "/workspace/f", "mode": "0640", "ok": True}
    assert meta(container, "stat", path="/workspace/f").json()["mode"] == "0640"
    assert meta(container, "chmod", "PATCH", {"mode": "0640"}, path="/workspace/l").error == "symlink_not_allowed"
    assert meta(container, "chmod", "PATCH", {"mode": "0640"}, path="/workspace/x").error == "file_not_found"
    assert meta(container, "chmod", "PATCH", {"mode": "0640"}, path="/etc/passwd").error == "file_access_denied"
    assert meta(container, "chmod", "PATCH", {"mode": "0640", "path": "/x"}, path="/workspace/f").error == \
        "invalid_request"
    assert meta(container, "chmod", "PATCH", {"mode": "1777"}, path="/workspace/f").error == "invalid_request"
    assert meta(container, "chmod", "PATCH", {"mode": "0644"}, path="/").error == "invalid_request"


def test_method_and_allow(container):
    r = meta(container, "chmod", "POST", {"mode": "0644"}, path="/workspace/f")
    assert r.status == 405 and r.headers["allow"] == "PATCH, OPTIONS"


def test_list_fails_when_an_entry_vanishes(container):
    # The agent's own /proc/self/fd lists the descriptor it read the directory
    # through, which is closed before the per-entry stat: a vanished entry, every time.
    r = meta(container, "list", path="/proc/self/fd")
    assert (r.status, r.error) == (403, "file_access_denied")


def test_lenient_listing_flag(start_service):
    svc = start_service("--lenient-listing")
    c = create_container(svc.api)
    r = meta(c, "list", path="/proc/self/fd")
    assert r.status == 200 and {e["name"] for e in r.json()["entries"]} >= {"0", "1", "2"}
