"""The configuration file ($XDG_CONFIG_HOME/mainbrella/config) and its
profiles, through the real binaries: --profile, -o profile=,
$MAINBRELLA_PROFILE, the precedence options > environment > profile >
defaults, and errors that name FILE:LINE."""
import json
import os
import subprocess
import tempfile
import time

import pytest

import mbtest
from test_mbexec_helpers import fake_mount


@pytest.fixture
def home(tmp_path):
    """An empty HOME and XDG_CONFIG_HOME; returns the config directory."""
    cfg = tmp_path / "xdg" / "mainbrella"
    cfg.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return cfg


def clean_env(cfg, **extra):
    """No key or URL in the environment: only the config file says."""
    e = dict(os.environ)
    for k in ("MAINBRELLA_API_URL", "MAINBRELLA_API_KEY", "MAINBRELLA_API_KEY_FILE",
              "MAINBRELLA_PROFILE"):
        e.pop(k, None)
    e["XDG_CONFIG_HOME"] = str(cfg.parent)
    e["HOME"] = str(cfg.parent.parent / "home")
    if mbtest.ASAN:
        e.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
    e.update(extra)
    return e


def write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return path


def key_file(cfg, service, name="local.key", key=None):
    return write(cfg / name, (key or service.key) + "\n")


def config(cfg, text, mode=0o600):
    return write(cfg / "config", text, mode)


def mbx(args, env, cwd="/"):
    return subprocess.run([mbtest.MBEXEC] + list(args), capture_output=True, timeout=120,
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL)


def mbfs(args, env):
    return subprocess.run([mbtest.MBFS] + list(args), capture_output=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


WRONG_KEY = "mb_" + "0" * 64


@pytest.fixture
def sandbox_dir(service, container):
    """A directory with a control file naming the service (no FUSE)."""
    return fake_mount(service, container)


def two_profiles(cfg, service):
    """[default] for the hosted service, [local] for the test's."""
    key_file(cfg, service)
    write(cfg / "api-key", WRONG_KEY + "\n")
    return config(cfg, "# profiles\n"
                       "[default]\n"
                       "url = https://api.mainbrella.com\n"
                       "key_file = ~/../xdg/mainbrella/api-key\n"
                       "\n"
                       "[local]\n"
                       "url = %s\n"
                       "key_file = local.key\n" % service.url)


def test_mbexec_profile_option(service, home, sandbox_dir):
    two_profiles(home, service)
    p = mbx(["--profile", "local", "--mount", sandbox_dir, "echo", "hi"], clean_env(home))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"hi\n"


def test_mbexec_profile_from_environment(service, home, sandbox_dir):
    two_profiles(home, service)
    p = mbx(["echo", "hi"], clean_env(home, MAINBRELLA_PROFILE="local"), cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"hi\n"


def test_mbexec_without_profile_uses_the_mounts(service, home, sandbox_dir):
    """No profile named: the one whose url is the mount's, not [default]."""
    two_profiles(home, service)
    p = mbx(["echo", "hi"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr


def test_mbexec_profile_of_another_service_is_125(service, home, sandbox_dir):
    two_profiles(home, service)
    p = mbx(["--profile", "default", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125, p.stderr
    err = p.stderr.decode()
    assert "profile 'default'" in err and "%s:3" % (home / "config") in err, err


def test_environment_beats_profile_and_option_beats_environment(service, home, sandbox_dir):
    key_file(home, service, "local.key", WRONG_KEY)
    config(home, "[local]\nurl = %s\nkey_file = local.key\n" % service.url)
    env = clean_env(home, MAINBRELLA_PROFILE="local")
    p = mbx(["true"], env, cwd=sandbox_dir)
    assert p.returncode == 255, p.stderr
    # the environment's key wins over the profile's key_file
    p = mbx(["true"], dict(env, MAINBRELLA_API_KEY=service.key), cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr
    good = key_file(home, service, "good.key")
    p = mbx(["true"], dict(env, MAINBRELLA_API_KEY_FILE=str(good)), cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr
    # --key-file wins over the environment
    p = mbx(["--key-file", str(good), "true"], dict(env, MAINBRELLA_API_KEY=WRONG_KEY),
            cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr


def test_profile_key_file_error_names_the_profile(service, home, sandbox_dir):
    config(home, "[local]\nurl = %s\nkey_file = ~/missing.key\n" % service.url)
    p = mbx(["--profile", "local", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125
    err = p.stderr.decode()
    assert "missing.key" in err and "profile 'local'" in err and "config:3" in err, err


BAD_FILES = [
    ("[local]\nurl %s\n", 2, "expected '[NAME]' or 'KEY = VALUE'"),
    ("[local]\nurl = %s\ncolour = blue\n", 3, "unknown key 'colour'"),
    ("[local]\nurl = %s\nkey = mb_abc\n", 3, "key_file"),
    ("url = %s\n[local]\n", 1, "before the first [PROFILE]"),
    ("[local]\nurl = %s\n[local]\n", 3, "again"),
    ("[local]\nurl = %s\nurl = http://127.0.0.1:2\n", 3, "twice"),
    ("[local\nurl = %s\n", 1, "expected '[NAME]'"),
    ("[local]\n\n# ok\nurl = ftp://%s\n", 4, "https://"),
]


@pytest.mark.parametrize("text,line,words", BAD_FILES)
def test_bad_lines_name_file_and_line(service, home, sandbox_dir, text, line, words, tmp_path):
    config(home, text % service.url)
    where = "%s:%d:" % (home / "config", line)
    p = mbx(["--profile", "local", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125, p.stderr
    err = p.stderr.decode()
    assert err.startswith("mbexec: ") and where in err and words in err, err
    # mbfs: one line, exit 1, nothing mounted
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = mbfs(["-f", "--profile", "local", "c1", str(mnt)], clean_env(home))
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mbfs: ") and where in lines[0], lines
    assert not os.path.ismount(mnt)


def test_a_bad_line_counts_even_in_an_unused_profile(service, home, sandbox_dir):
    key_file(home, service)
    config(home, "[local]\nurl = %s\nkey_file = local.key\n[other]\nnope = 1\n" % service.url)
    p = mbx(["--profile", "local", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125 and b"config:5:" in p.stderr, p.stderr


def test_missing_profile(service, home, sandbox_dir, tmp_path):
    two_profiles(home, service)
    p = mbx(["--profile", "nosuch", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125
    err = p.stderr.decode()
    assert "no profile 'nosuch'" in err and str(home / "config") in err and "default, local" in err, err
    r = mbfs(["-f", "-o", "profile=nosuch", "c1", str(tmp_path)],
             clean_env(home))
    assert r.returncode == 1 and b"no profile 'nosuch'" in r.stderr, r.stderr
    # no file at all: a profile asked for is still an error
    os.unlink(home / "config")
    p = mbx(["true"], clean_env(home, MAINBRELLA_PROFILE="local"), cwd=sandbox_dir)
    assert p.returncode == 125 and b"does not exist" in p.stderr, p.stderr


def test_writable_config_is_refused(service, home, sandbox_dir):
    two_profiles(home, service)
    os.chmod(home / "config", 0o666)
    p = mbx(["--profile", "local", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 125
    assert b"writable by group or others" in p.stderr and b"chmod go-w" in p.stderr, p.stderr
    # a readable one is fine: it holds no secret
    os.chmod(home / "config", 0o644)
    p = mbx(["--profile", "local", "true"], clean_env(home), cwd=sandbox_dir)
    assert p.returncode == 0, p.stderr


def test_no_config_file_changes_nothing(service, sandbox_dir, tmp_path):
    """The environment alone, as before (the suite's usual way)."""
    e = service.env(XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path))
    p = mbx(["echo", "ok"], e, cwd=sandbox_dir)
    assert p.returncode == 0 and p.stdout == b"ok\n", p.stderr


def wait_mounted(proc, mnt, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.ismount(mnt) and os.path.exists(os.path.join(mnt, ".mainbrella")):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def unmount(proc, mnt):
    if os.path.ismount(mnt):
        mbtest.fusermount_u(mnt)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def mount_with(args, env, spec, mnt):
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([mbtest.MBFS, "-f"] + list(args) + [spec, mnt], stdout=log,
                            stderr=subprocess.STDOUT, env=env)
    ok = wait_mounted(proc, mnt)
    return proc, ok, log


def read_log(log):
    log.seek(0)
    return log.read().decode(errors="replace")


@pytest.mark.parametrize("how", [["--profile", "local"], ["-o", "profile=local"],
                                 ["--profile=local"]])
def test_mbfs_mounts_with_a_profile(service, container, home, need_fuse, tmp_path, how):
    two_profiles(home, service)
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    spec = "%s@%s" % (container["id"], container["createdAt"])
    proc, ok, log = mount_with(how, clean_env(home), spec, mnt)
    try:
        assert ok, read_log(log)
        with open(os.path.join(mnt, ".mainbrella")) as f:
            ctl = json.load(f)
        assert ctl["apiUrl"] == service.url
        # mbexec in that mount finds the same profile by the mount's URL
        p = mbx(["echo", "in"], clean_env(home), cwd=mnt)
        assert p.returncode == 0 and p.stdout == b"in\n", p.stderr
    finally:
        rc = unmount(proc, mnt)
    out = read_log(log)
    assert rc == 0 and not mbtest.sanitizer_report(out), out
    assert service.key not in out


def test_mbfs_environment_url_beats_profile(service, container, home, need_fuse, tmp_path):
    key_file(home, service)
    config(home, "[local]\nurl = http://127.0.0.1:1\nkey_file = local.key\n")
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    spec = "%s@%s" % (container["id"], container["createdAt"])
    # an option beats the environment, which beats the profile
    for args, extra in ((["-o", "api_url=" + service.url], {"MAINBRELLA_API_URL": "http://127.0.0.1:2"}),
                        ([], {"MAINBRELLA_API_URL": service.url})):
        proc, ok, log = mount_with(["--profile", "local"] + args,
                                   clean_env(home, **extra), spec, mnt)
        try:
            assert ok, read_log(log)
        finally:
            assert unmount(proc, mnt) == 0, read_log(log)


@pytest.mark.parametrize("how", [["--profile", "local"], ["--profile=local"], ["-o", "profile=local"],
                                 "env"], ids=["option", "option=", "o", "environment"])
def test_list_and_stop_take_a_profile(service, home, how):
    """--list and --stop find the service and key as a mount does: the
    profile by option or $MAINBRELLA_PROFILE."""
    two_profiles(home, service)
    ident = service.create_container()
    env = clean_env(home, MAINBRELLA_PROFILE="local") if how == "env" else clean_env(home)
    args = [] if how == "env" else how
    p = mbfs(["--list", "--json"] + args, env)
    assert p.returncode == 0, p.stderr
    assert [c for c in json.loads(p.stdout) if c["createdAt"] == ident["createdAt"]], p.stdout
    p = mbfs(["--stop"] + args + ["%s@%s" % (ident["id"], ident["createdAt"])], env)
    assert p.returncode == 0, p.stderr
    # --status accepts it too (the mount already knows its service)
    p = mbfs(["--status", "--profile", "local", str(home)], env)
    assert b"unknown option" not in p.stderr, p.stderr
