"""mbexec: exit codes, directories, environment, quoting, stdin, output,
--json, configuration errors, economy of requests (exec strategy)."""
import json
import os
import socket
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import sync
from test_mbexec_helpers import (MiB, fake_mount, jobs_created, mbx, module_mount,
                                 requests, rmtree, sh, sha, unique)


@pytest.fixture(scope="module")
def mnt(service, container):
    yield from module_mount(service, container)


@pytest.fixture
def wd(mnt):
    """A fresh directory in the mount: (local path, remote path)."""
    name = unique("bx")
    os.mkdir(mnt.path(name))
    sync(mnt)   # queued (write-back): on the sandbox before a test counts
    return mnt.path(name), "/workspace/" + name


@pytest.mark.parametrize("code", [0, 1, 3, 42, 255])
def test_exit_code_is_the_commands(service, wd, code):
    p = mbx(service, ["sh", "-c", "exit %d" % code], wd[0])
    assert p.returncode == code, p.stderr


def test_command_not_found_is_127(service, wd):
    p = mbx(service, ["no-such-command-xyz"], wd[0])
    assert p.returncode == 127
    assert b"not found" in p.stderr


@pytest.mark.parametrize("sig,code", [("KILL", 137), ("TERM", 143), ("SEGV", 139)])
def test_signal_death_is_128_plus_n(service, wd, sig, code):
    p = mbx(service, ["sh", "-c", "kill -%s $$" % sig], wd[0])
    assert p.returncode == code, p.stderr


def test_runs_in_the_matching_remote_directory(service, mnt, wd):
    os.makedirs(os.path.join(wd[0], "a", "b c"))
    p = mbx(service, ["pwd"], os.path.join(wd[0], "a", "b c"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == (wd[1] + "/a/b c\n").encode()
    p = mbx(service, ["pwd"], mnt.mountpoint)
    assert p.stdout == b"/workspace\n"


def test_dash_C_local_relative_and_remote_absolute(service, wd):
    os.mkdir(os.path.join(wd[0], "sub"))
    p = mbx(service, ["-C", "sub", "pwd"], wd[0])
    assert p.stdout == (wd[1] + "/sub\n").encode(), p.stderr
    p = mbx(service, ["-C", "/tmp", "pwd"], wd[0])
    assert p.stdout == b"/tmp\n", p.stderr


def test_dash_C_missing_remote_directory_is_125(service, wd):
    p = mbx(service, ["-C", "/no/such/dir", "true"], wd[0])
    assert p.returncode == 125
    assert b"/no/such/dir" in p.stderr and b"does not exist" in p.stderr


def test_mount_option_from_outside(service, mnt, wd):
    name = os.path.basename(wd[0])
    p = mbx(service, ["--mount", wd[0], "pwd"], "/")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("/workspace/%s\n" % name).encode()
    p = mbx(service, ["--mount", mnt.mountpoint, "-C", "/etc", "pwd"], "/")
    assert p.stdout == b"/etc\n", p.stderr


def test_environment(service, wd):
    p = mbx(service, ["-e", "MBX_A=one two", "-e", "MBX_B", "-e", "MBX_UNSET_XYZ",
                      "sh", "-c", 'printf "%s|%s|%s" "$MBX_A" "$MBX_B" "${MBX_UNSET_XYZ-unset}"'],
            wd[0], env={"MBX_B": "it's $HOME"})
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"one two|it's $HOME|unset"


@pytest.mark.parametrize("bad", ["1X=2", "A-B=1", "=x", "X" * 65 + "=1"])
def test_bad_environment_names_are_125(service, wd, bad):
    p = mbx(service, ["-e", bad, "true"], wd[0])
    assert p.returncode == 125
    assert b"invalid variable name" in p.stderr


def test_arguments_pass_exactly(service, wd):
    args = ["a b", "it's", 'say "hi"', "$HOME", "*", "line1\nline2", "", "-n",
            "back\\slash", "tab\there", "`id`", "$(id)", ";", "&&", "caf\u00e9 \u2603"]
    p = mbx(service, ["printf", "%s\\0"] + args, wd[0])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split(b"\0")[:-1] == [a.encode() for a in args]


def test_sh_script(service, wd):
    p = mbx(service, ["--sh", "x=5; for i in 1 2; do echo $((x+i)); done | tr '\\n' ,"], wd[0])
    assert p.stdout == b"6,7,", p.stderr


def test_long_command_goes_through_a_file(service, wd):
    script = "cat <<'EOF'\n" + ("0123456789abcdef" * 1500) + "\nEOF\n"
    p = mbx(service, ["--sh", script], wd[0])
    assert p.returncode == 0, p.stderr
    assert p.stdout == (("0123456789abcdef" * 1500) + "\n").encode()


@pytest.mark.parametrize("size", [0, 1, 100, 8192, 8193, 3 * MiB])
def test_stdin_bytes_arrive_exactly(service, wd, size):
    data = os.urandom(size)
    p = mbx(service, ["sh", "-c", "f=$(mktemp); cat >$f; sha256sum <$f | cut -d' ' -f1; "
                      "wc -c <$f; rm -f $f"], wd[0], input=data)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    assert lines[0].decode() == sha(data)
    assert int(lines[1]) == size


def test_printf_pipe_wc(service, wd):
    p = subprocess.run("printf 'a\\nb\\n' | %s wc -l" % mbtest.MBEXEC, shell=True, cwd=wd[0],
                       env=service.env(), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == b"2"


def test_yes_pipe_head_terminates(service, wd):
    p = subprocess.run("yes | %s head -1" % mbtest.MBEXEC, shell=True, cwd=wd[0],
                       env=service.env(), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"y\n"


def test_stdin_file_and_no_stdin(service, wd):
    path = os.path.join(wd[0], "in.txt")
    with open(path, "wb") as f:
        f.write(b"from a file\n")
    with open(path, "rb") as f:
        p = mbtest.run_mbexec(service, ["cat"], cwd=wd[0], stdin=f)
    assert p.stdout == b"from a file\n", p.stderr
    p = mbx(service, ["-n", "cat"], wd[0], input=b"never sent")
    assert p.returncode == 0 and p.stdout == b"", p.stderr


def test_binary_stdout_is_byte_exact(service, container, wd):
    blob = os.urandom(int(2.5 * MiB)) + bytes(range(256)) * 64
    name = "blob-%s.bin" % unique()
    service.put_file(container, "/tmp/" + name, blob[:MiB])
    service.put_file(container, "/tmp/" + name + ".2", blob[MiB:2 * MiB])
    service.put_file(container, "/tmp/" + name + ".3", blob[2 * MiB:])
    p = mbx(service, ["sh", "-c", "cat /tmp/%s /tmp/%s.2 /tmp/%s.3" % (name, name, name)], wd[0])
    assert p.returncode == 0, p.stderr
    assert len(p.stdout) == len(blob)
    assert sha(p.stdout) == sha(blob)


def test_stdout_and_stderr_stay_separate(service, wd):
    p = mbx(service, ["sh", "-c", "for i in 1 2 3; do echo out$i; echo err$i >&2; done; "
                      "printf '\\377\\000' >&2"], wd[0])
    assert p.stdout == b"out1\nout2\nout3\n"
    assert p.stderr == b"err1\nerr2\nerr3\n\xff\x00"


def test_json_result(service, wd):
    p = mbx(service, ["--json", "sh", "-c", "echo hi; printf 'bad\\377\\000' >&2; exit 4"], wd[0])
    assert p.returncode == 4
    doc = json.loads(p.stdout)
    assert doc["exitCode"] == 4 and doc["signal"] is None and doc["timedOut"] is False
    assert doc["stdout"] == "hi\n"
    assert doc["stderr"] == "bad\ufffd\u0000"
    assert doc["stdoutTruncated"] is False and doc["stderrTruncated"] is False
    assert doc["strategy"] == "exec" and doc["remoteId"]
    assert isinstance(doc["executionTimeMs"], int)
    p = mbx(service, ["--json", "sh", "-c", "kill -9 $$"], wd[0])
    doc = json.loads(p.stdout)
    assert p.returncode == 137 and doc["exitCode"] == 137 and doc["signal"] == 9


def test_mount_sees_changes_made_by_the_command(service, wd):
    path = os.path.join(wd[0], "f.txt")
    with open(path, "w") as f:
        f.write("aaaa")
    with open(path) as f:
        assert f.read() == "aaaa"
    p = mbx(service, ["sh", "-c", "printf bbbb > f.txt; mkdir newdir"], wd[0])
    assert p.returncode == 0, p.stderr
    with open(path) as f:
        assert f.read() == "bbbb"
    assert os.path.isdir(os.path.join(wd[0], "newdir"))


def test_hundred_commands_use_no_managed_jobs(service, wd):
    service.reset_stats()
    for i in range(100):
        p = mbx(service, ["true"], wd[0])
        assert p.returncode == 0, p.stderr
    stats = service.stats()
    print("requests for 100 x mbexec true:", stats["requests"])
    assert jobs_created(service) == 0
    assert mbtest.requests_for(stats, "POST /containers/executions") == 0
    # one launch each (a slow machine may need an extra poll now and then),
    # and the mount's one listing of what it held, where mbexec looks up
    # its directory after the last command (relist.h), instead of a stat
    # and a list (the root's listing, shared with other tests, may change
    # meanwhile or grow past what is listed again)
    assert 100 <= mbtest.requests_for(stats, "POST /containers/exec") <= 220
    assert sum(stats["requests"].values()) <= 230, stats["requests"]


def test_usage_errors_are_125_and_send_nothing(service, wd):
    service.reset_stats()
    for args in ([], ["-t", "-T", "true"], ["--timeout", "soon", "true"], ["--mode", "x", "true"],
                 ["--sh", "true", "extra"], ["-n", "-i", "true"], ["--json", "-t", "true"],
                 ["--bogus", "true"], ["-C"]):
        p = mbx(service, args, wd[0])
        assert p.returncode == 125, (args, p.stderr)
        assert p.stderr.startswith(b"mbexec: "), p.stderr
    assert service.stats()["requests"] == {}


def test_help_and_version(service, wd):
    p = mbx(service, ["--help"], wd[0])
    assert p.returncode == 0 and b"usage: mbexec" in p.stdout
    p = mbx(service, ["-V"], wd[0])
    assert p.returncode == 0 and p.stdout.startswith(b"mbexec ")


def test_outside_any_mount_is_125(service):
    p = mbx(service, ["true"], "/")
    assert p.returncode == 125
    assert b"not inside a Mainbrella mount" in p.stderr and b"--mount" in p.stderr


def test_fake_control_directory_works_and_stays_intact(service, container):
    d = fake_mount(service, container)
    try:
        before = open(os.path.join(d, ".mainbrella")).read()
        os.mkdir(os.path.join(d, "x"))
        sh(service, container, "mkdir -p /workspace/x")
        p = mbx(service, ["sh", "-c", "pwd; echo ok"], os.path.join(d, "x"))
        assert p.returncode == 0, p.stderr
        assert p.stdout == b"/workspace/x\nok\n"
        assert open(os.path.join(d, ".mainbrella")).read() == before
    finally:
        rmtree(d)


def test_conflicting_api_url_is_125(service, container):
    d = fake_mount(service, container)
    try:
        p = mbx(service, ["true"], d, env={"MAINBRELLA_API_URL": "http://127.0.0.1:1"})
        assert p.returncode == 125
        assert b"MAINBRELLA_API_URL" in p.stderr
    finally:
        rmtree(d)


def test_service_down_is_255_and_says_not_started(service, container):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = "http://127.0.0.1:%d" % port
    d = fake_mount(service, container, api_url=url)
    try:
        p = mbx(service, ["true"], d, env={"MAINBRELLA_API_URL": url})
        assert p.returncode == 255
        assert b"did not start" in p.stderr, p.stderr
        assert service.key.encode() not in p.stderr
    finally:
        rmtree(d)


def test_bad_key_is_255_and_never_printed(service, container):
    d = fake_mount(service, container)
    try:
        bad = "mb_" + "0" * 64
        p = mbx(service, ["true"], d, env={"MAINBRELLA_API_KEY": bad})
        assert p.returncode == 255
        assert b"did not start" in p.stderr
        assert bad.encode() not in p.stderr
    finally:
        rmtree(d)


def test_arguments_that_are_not_utf8(service, wd):
    args = [b"\xff\xfe", b"caf\xe9", b"ok\n"]
    p = mbx(service, [b"printf", b"%s\\0"] + args, wd[0])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split(b"\0")[:-1] == args


def test_cat_of_a_file_written_through_the_mount(service, wd):
    blob = os.urandom(MiB + 4321)
    with open(os.path.join(wd[0], "blob.bin"), "wb") as f:
        f.write(blob)
    p = subprocess.run("%s cat blob.bin | sha256sum" % mbtest.MBEXEC, shell=True, cwd=wd[0],
                       env=service.env(), capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0].decode() == sha(blob)


def test_programs_replace_the_shell_and_builtins_still_work(service, wd):
    p = mbx(service, ["sh", "-c", "kill -9 $$"], wd[0])
    assert p.returncode == 137 and p.stderr == b""   # no "Killed" from a shell between
    p = mbx(service, ["sh", "-c", "echo $$; cat /proc/$$/stat | cut -d' ' -f5"], wd[0])
    pid, pgid = p.stdout.split()
    assert pid == pgid   # the command leads its own process group
    p = mbx(service, ["type", "sh"], wd[0])
    assert p.returncode == 0 and b"sh is" in p.stdout, p.stderr
    p = mbx(service, ["cd", "/nonexistent-dir"], wd[0])
    assert p.returncode != 0


def test_command_sees_metadata_changes_made_through_the_mount(service, wd):
    d = os.path.join(wd[0], "meta")
    os.mkdir(d)
    with open(os.path.join(d, "a"), "w") as f:
        f.write("x")
    os.chmod(os.path.join(d, "a"), 0o751)
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))
    os.symlink("b", os.path.join(d, "link"))
    os.utime(os.path.join(d, "b"), (1500000000, 1500000000))   # queued by the mount
    p = mbx(service, ["sh", "-c", "stat -c '%n %a %Y' b; readlink link; ls"], d)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"b 751 1500000000\nb\nb\nlink\n"


def test_closed_stdin_is_not_reused(service, wd):
    p = subprocess.run([mbtest.MBEXEC, "sh", "-c", "cat; echo end"], cwd=wd[0], env=service.env(),
                       capture_output=True, timeout=60, preexec_fn=lambda: os.close(0))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"end\n"
