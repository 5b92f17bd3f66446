"""mbfs command line: errors are one line, exit non-zero and mount nothing;
fstab-style options, pinning the generation, --create, -h and -V."""
import json
import os
import subprocess
import tempfile

import pytest

import mbtest
from test_mbfs_helpers import read_file, unique, until


@pytest.fixture
def mnt():
    path = tempfile.mkdtemp(prefix="mbfs-cli-", dir=mbtest.tmp_base())
    yield path
    if os.path.ismount(path):
        mbtest.fusermount_u(path)
    os.rmdir(path)


def run(service, args, env=None, timeout=60):
    e = service.env(**(env or {}))
    return subprocess.run([mbtest.MBFS] + list(args), capture_output=True, timeout=timeout,
                          env=e, stdin=subprocess.DEVNULL)


def assert_refused(r, mnt, *words):
    assert r.returncode != 0
    err = r.stderr.decode()
    lines = [l for l in err.splitlines() if l.strip() and "AddressSanitizer" not in l]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], err
    assert not os.path.ismount(mnt)


def spec(ident, root="/workspace"):
    return "%s@%s:%s" % (ident["id"], ident["createdAt"], root)


def test_bad_spec(service, mnt, need_fuse):
    assert_refused(run(service, ["-f", "nosuch container", mnt]), mnt, "nosuch container")
    assert_refused(run(service, ["-f", "c1@yesterday:/workspace", mnt]), mnt)


def test_missing_arguments(service, container, mnt, need_fuse):
    assert_refused(run(service, ["-f"]), mnt, "missing")
    assert_refused(run(service, ["-f", spec(container)]), mnt, "MOUNTPOINT")
    assert_refused(run(service, ["-f", spec(container), "/nonexistent/dir"]), mnt, "/nonexistent/dir")


def test_bad_option_values(service, container, mnt, need_fuse):
    assert_refused(run(service, ["-f", "-o", "attr_timeout=soon", spec(container), mnt]), mnt,
                   "attr_timeout")
    assert_refused(run(service, ["-f", "-o", "uid=me", spec(container), mnt]), mnt, "uid")


def test_missing_key(service, container, mnt, tmp_path, need_fuse):
    env = {"MAINBRELLA_API_KEY": "", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    e = service.env(**env)
    del e["MAINBRELLA_API_KEY"]
    r = subprocess.run([mbtest.MBFS, "-f", spec(container), mnt], capture_output=True, env=e, timeout=60)
    assert_refused(r, mnt)


def test_key_file_option(service, container, mnt, tmp_path, need_fuse):
    key = tmp_path / "key"
    key.write_text(service.key + "\n")
    os.chmod(str(key), 0o600)
    e = service.env()
    del e["MAINBRELLA_API_KEY"]
    e["HOME"] = str(tmp_path)
    p = subprocess.Popen([mbtest.MBFS, "-f", "-o", "key_file=" + str(key), spec(container), mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e)
    try:
        wait_mounted(mnt, p)
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        assert service.key not in json.dumps(doc)
    finally:
        mbtest.fusermount_u(mnt)
        assert p.wait(30) == 0
    # an unsafe key file is refused
    os.chmod(str(key), 0o644)
    r = subprocess.run([mbtest.MBFS, "-f", "-o", "key_file=" + str(key), spec(container), mnt],
                       capture_output=True, env=e, timeout=60)
    assert_refused(r, mnt)
    assert service.key not in r.stderr.decode()


def test_unknown_container(service, mnt, need_fuse):
    assert_refused(run(service, ["-f", "c77:/workspace", mnt]), mnt, "c77")
    assert_refused(run(service, ["-f", "c77@2026-01-01T00:00:00.000Z:/workspace", mnt]), mnt, "c77")


def test_stopped_generation(service, container, mnt, need_fuse):
    old = dict(container, createdAt="2020-01-01T00:00:00.000Z")
    assert_refused(run(service, ["-f", spec(old), mnt]), mnt, "2020-01-01T00:00:00.000Z")


def test_missing_remote_dir(service, container, mnt, need_fuse):
    assert_refused(run(service, ["-f", spec(container, "/no/such/dir"), mnt]), mnt, "/no/such/dir")


def wait_mounted(mnt, proc, timeout=20):
    import time
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.ismount(mnt) and os.path.exists(os.path.join(mnt, ".mainbrella")):
            return
        if proc.poll() is not None:
            raise AssertionError("mbfs exited: %r" % (proc.stdout.read() if proc.stdout else b""))
        time.sleep(0.05)
    raise AssertionError("not mounted")


def test_without_generation_pins_current(service, container, mnt, need_fuse):
    p = subprocess.Popen([mbtest.MBFS, "-f", container["id"], mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=service.env())
    try:
        wait_mounted(mnt, p)
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        assert doc["createdAt"] == container["createdAt"]
        assert doc["root"] == "/workspace"
    finally:
        mbtest.fusermount_u(mnt)
        assert p.wait(30) == 0


def test_fstab_style_options_and_daemon(service, container, mnt, need_fuse):
    # mount.fuse3 passes fstab options through -o; without -f mbfs daemonises
    name = unique("fstab")
    r = run(service, [spec(container), mnt, "-o",
                      "rw,noauto,user,_netdev,nofail,x-systemd.automount,attr_timeout=5,dir_timeout=5"])
    assert r.returncode == 0, r
    try:
        assert os.path.ismount(mnt)
        with open(os.path.join(mnt, name), "w") as f:
            f.write("via daemon\n")
        assert read_file(os.path.join(mnt, name)) == b"via daemon\n"
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        assert doc["pid"] != os.getpid()
    finally:
        mbtest.fusermount_u(mnt)


def test_read_only(service, container, mnt, need_fuse):
    p = subprocess.Popen([mbtest.MBFS, "-f", "-o", "ro", spec(container), mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=service.env())
    try:
        wait_mounted(mnt, p)
        with pytest.raises(OSError):
            with open(os.path.join(mnt, unique("ro")), "w") as f:
                f.write("no")
        assert os.listdir(mnt) is not None
    finally:
        mbtest.fusermount_u(mnt)
        assert p.wait(30) == 0


def test_help_and_version(service):
    r = run(service, ["-h"])
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "usage: mbfs" in out and "attr_timeout" in out and "--create" in out
    r = run(service, ["-V"])
    assert r.returncode == 0 and r.stdout.decode().startswith("mbfs ")


def test_create_mounts_new_container(service, mnt, tmp_path, need_fuse):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    p = subprocess.Popen([mbtest.MBFS, "-f", "--create", mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=service.env(**env))
    ident = None
    try:
        line = p.stdout.readline().decode().strip()
        cid, _, gen = line.partition("@")
        assert cid and gen, line
        ident = {"id": cid, "createdAt": gen}
        wait_mounted(mnt, p)
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        assert (doc["id"], doc["createdAt"]) == (cid, gen)
        with open(os.path.join(mnt, "hello"), "w") as f:
            f.write("hi\n")
        # queued at close (write-back): `sync DIR` (fsync of the directory) sends it
        r = subprocess.run(["sync", mnt], capture_output=True)
        assert r.returncode == 0, r
        assert service.exec(ident, "cat /workspace/hello")["stdout"] == "hi\n"
        # the creation key was saved 0600 and removed once the outcome was known
        state = tmp_path / "state" / "mbfs"
        assert state.is_dir()
        assert list(state.iterdir()) == []
    finally:
        mbtest.fusermount_u(mnt)
        p.wait(30)
        if ident:
            service.delete_container(ident)


def test_unmount_ends_daemon_despite_namespace_copies(service, container, need_fuse):
    # a process that made a new mount namespace holds a copy of the mount;
    # fusermount3 -u must still end mbfs (and detach the copy)
    import shutil
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare")
    m = mbtest.Mount(service, container)
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "120"])
    try:
        # the copy exists once the holder runs sleep in a namespace of its own
        ours = os.readlink("/proc/self/ns/mnt")
        until(lambda: holder.poll() is None and
                 os.readlink("/proc/%d/ns/mnt" % holder.pid) != ours and
                 "sleep" in open("/proc/%d/comm" % holder.pid).read(),
                 "unshare to make the namespace")
        rc = m.unmount()
        assert rc == 0, m.log()
    finally:
        holder.kill()
        holder.wait()


def test_mount_fuse3_fstab_entry(service, container, mnt, need_fuse):
    # what `mount /mnt/sb` does for an fstab line of type fuse.mbfs
    import shutil
    helper = shutil.which("mount.fuse3") or "/sbin/mount.fuse3"
    if not os.path.exists(helper):
        pytest.skip("mount.fuse3 not installed")
    e = service.env()
    e["PATH"] = os.path.dirname(mbtest.MBFS) + os.pathsep + e.get("PATH", "")
    r = subprocess.run([helper, spec(container), mnt, "-t", "fuse.mbfs", "-o",
                        "noauto,_netdev,nofail,attr_timeout=5"],
                       capture_output=True, env=e, timeout=60)
    assert r.returncode == 0, r
    try:
        assert os.path.ismount(mnt)
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        assert doc["id"] == container["id"]
    finally:
        mbtest.fusermount_u(mnt)


# --- the examples a user copies: --help's fstab line, mbfs(1)'s unit ---

def key_home(service, tmp_path):
    """A HOME whose ~/.config/mainbrella/api-key holds the key (0600), and
    an environment without MAINBRELLA_API_KEY: what a mount from fstab or
    systemd sees. The URL stands in for the hosted default."""
    home = tmp_path / "home"
    cfg = home / ".config" / "mainbrella"
    cfg.mkdir(parents=True)
    key = cfg / "api-key"
    key.write_text(service.key + "\n")
    os.chmod(str(key), 0o600)
    e = service.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                    XDG_CACHE_HOME=str(home / ".cache"))
    del e["MAINBRELLA_API_KEY"]
    e["PATH"] = os.path.dirname(mbtest.MBFS) + os.pathsep + e.get("PATH", "")
    return str(home), str(key), e


def test_help_fstab_line_mounts_the_running_generation(service, container, mnt, tmp_path,
                                                       need_fuse):
    import shutil
    helper = shutil.which("mount.fuse3") or "/sbin/mount.fuse3"
    if not os.path.exists(helper):
        pytest.skip("mount.fuse3 not installed")
    out = run(service, ["--help"]).stdout.decode()
    line = [l for l in out.splitlines() if "fuse.mbfs" in l][0].split()
    spec_, where, kind, opts = line[:4]
    assert (where, kind) == ("/mnt/sb", "fuse.mbfs"), line
    home, key, e = key_home(service, tmp_path)
    opts = opts.replace("/home/USER/.config/mainbrella/api-key", key)
    assert "key_file=" + key in opts, opts
    # what `mount /mnt/sb` runs for that line
    r = subprocess.run([helper, spec_.replace("ID", container["id"]), mnt, "-t", kind,
                        "-o", opts], capture_output=True, env=e, timeout=60)
    assert r.returncode == 0, r
    try:
        doc = json.loads(read_file(os.path.join(mnt, ".mainbrella")))
        # no generation in the line: the running one, looked up now
        assert (doc["id"], doc["createdAt"], doc["root"]) == (
            container["id"], container["createdAt"], "/workspace"), doc
    finally:
        mbtest.fusermount_u(mnt)


def man_unit():
    """The systemd unit of mbfs(1)'s EXAMPLES, as a user would save it."""
    with open(os.path.join(mbtest.ROOT, "man", "mbfs.1"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("systemd user service", 1)[1].split(".nf\n", 1)[1].split(".fi\n", 1)[0]
    return block.replace("\\-", "-").replace("\\e", "\\")


def test_man_systemd_unit_mounts_logs_and_sends_before_unmounting(service, container, tmp_path,
                                                                  need_fuse):
    import shlex
    unit = man_unit()
    assert "[Service]" in unit and "[Install]" in unit, unit
    home, key, e = key_home(service, tmp_path)
    keys = {}
    for l in unit.splitlines():
        k, sep, v = l.partition("=")
        if sep and k in ("Environment", "ExecStartPre", "ExecStart", "ExecStop"):
            # systemd's %h, this container, this build's mbfs
            keys[k] = (v.replace("%h", home).replace("c1:/workspace", container["id"] + ":/workspace")
                       .replace("/usr/local/bin/mbfs", mbtest.MBFS))
    name, _, value = keys["Environment"].partition("=")
    assert (name, value) == ("MAINBRELLA_API_KEY_FILE", key), keys
    e[name] = value
    mp = os.path.join(home, "sb")
    assert subprocess.run(shlex.split(keys["ExecStartPre"]), env=e).returncode == 0
    p = subprocess.Popen(shlex.split(keys["ExecStart"]), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e)
    try:
        wait_mounted(mp, p)
        fname = unique("unit")
        with open(os.path.join(mp, fname), "w") as f:
            f.write("kept by the unit\n")
        stop = subprocess.run(shlex.split(keys["ExecStop"]), capture_output=True, env=e,
                              timeout=120)
        assert stop.returncode == 0, stop
        assert p.wait(60) == 0
    finally:
        if os.path.ismount(mp):
            mbtest.fusermount_u(mp)
        if p.poll() is None:
            p.kill()
            p.wait()
    # the log went to stderr, which systemd sends to the journal
    log = p.stderr.read().decode()
    assert not mbtest.sanitizer_report(log), log
    assert "info: mounted %s@%s:/workspace on '%s'" % (container["id"], container["createdAt"],
                                                       mp) in log, log
    # stopping it sent what was written before the unmount
    got = service.exec(container, "cat /workspace/" + fname)
    assert got["exitCode"] == 0 and got["stdout"] == "kept by the unit\n", got
