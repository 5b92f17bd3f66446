"""The scripts mbfs runs on the guest (fuse/guest/*.sh), run here under dash
with the arguments the C side passes, both as files (how a reader runs them
by hand) and as mbfs sends them: `set -- 'ARG'...`, a newline, then the text
embedded by common/embed.sh (comments, blank lines and indentation gone).
The reports checked are the ones fuse/xfer.c, xfer_up.c, touch.c and
remote.c parse."""
import hashlib
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUEST = os.path.join(ROOT, "fuse", "guest")
DASH = shutil.which("dash")

pytestmark = pytest.mark.skipif(DASH is None, reason="dash is not installed")


def shq(s):
    """As mb_buf_append_shq quotes."""
    return "'" + s.replace("'", "'\\''") + "'"


def embedded(name):
    """The script's text as common/embed.sh embeds it."""
    out = subprocess.run(["sed", "-e", "s/^[[:space:]]*//", "-e", "/^#/d", "-e", "/^$/d",
                          os.path.join(GUEST, name + ".sh")],
                         capture_output=True, text=True, check=True)
    return out.stdout


@pytest.fixture(params=["file", "embedded"])
def run(request):
    def go(name, *args):
        if request.param == "file":
            cmd = [DASH, os.path.join(GUEST, name + ".sh")] + list(args)
        else:
            text = "set --" + "".join(" " + shq(a) for a in args) + "\n" + embedded(name)
            cmd = [DASH, "-c", text]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, LC_ALL="C"))
    return go


def test_split_prints_the_piece_sizes(run, tmp_path):
    data = os.urandom(2500)
    (tmp_path / "f").write_bytes(data)
    d = tmp_path / "d"
    p = run("split", str(tmp_path / "f"), str(d), "1000")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1000", "1000", "500"]
    assert sorted(os.listdir(d)) == ["p.00000", "p.00001", "p.00002"]
    assert b"".join((d / n).read_bytes() for n in sorted(os.listdir(d))) == data
    assert os.stat(d).st_mode & 0o777 == 0o700


def test_split_of_an_empty_file_prints_nothing(run, tmp_path):
    (tmp_path / "e").write_bytes(b"")
    p = run("split", str(tmp_path / "e"), str(tmp_path / "d"), "1000")
    assert (p.returncode, p.stdout) == (0, "")


def test_split_failures_leave_no_directory(run, tmp_path):
    p = run("split", str(tmp_path / "missing"), str(tmp_path / "d"), "1000")
    assert p.returncode == 1 and "No such file" in p.stderr
    assert not (tmp_path / "d").exists()
    # an existing directory is not ours: left alone, nothing split into it
    (tmp_path / "f").write_bytes(b"x" * 10)
    (tmp_path / "d").mkdir()
    p = run("split", str(tmp_path / "f"), str(tmp_path / "d"), "1000")
    assert p.returncode == 1 and os.listdir(tmp_path / "d") == []


def staged(tmp_path, data, size=1000):
    d = tmp_path / "parts"
    d.mkdir()
    for i in range(0, len(data), size):
        (d / ("p.%05d" % (i // size))).write_bytes(data[i:i + size])
    return d


def sums(data, size=1000):
    return [hashlib.sha256(data[i:i + size]).hexdigest() for i in range(0, len(data), size)]


def join(run, d, a, first, target, data, hashes, size=1000):
    """join.sh as xfer_up.c calls it: target None for a round."""
    return run("join", str(d), str(a), str(size), str(first),
               "-" if target is None else str(target),
               "-" if target is None else str(len(data)), *hashes)


def test_join_replaces_the_target_keeping_its_mode(run, tmp_path):
    data = os.urandom(12345)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    t.write_bytes(b"old")
    os.chmod(t, 0o640)
    a = tmp_path / ".mbfs-up-0123"
    p = join(run, d, a, 0, t, data, sums(data))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert t.read_bytes() == data and os.stat(t).st_mode & 0o777 == 0o640
    assert not d.exists() and not a.exists()


def test_join_in_rounds_then_the_tail(run, tmp_path):
    data = os.urandom(12345)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    t.write_bytes(b"old")
    a = tmp_path / ".mbfs-up-4"
    h = sums(data)
    # rounds place parts and leave the target alone; a repeated round
    # writes the same bytes again
    for first, last in ((0, 4), (4, 9), (4, 9)):
        p = join(run, d, a, first, None, data, h[first:last])
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
        assert t.read_bytes() == b"old" and d.exists()
        assert a.read_bytes() == data[:last * 1000]
        assert os.stat(a).st_mode & 0o777 == 0o600
    p = join(run, d, a, 9, t, data, h[9:])
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert t.read_bytes() == data and not d.exists() and not a.exists()


def test_join_without_openssl_uses_sha256sum(tmp_path):
    """A guest without openssl: the same checks through sha256sum."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for t in ("cat", "dd", "stat", "chmod", "mv", "rm", "cut", "sha256sum"):
        os.symlink(shutil.which(t), tools / t)
    data = os.urandom(2500)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    h = sums(data)
    env = dict(os.environ, LC_ALL="C", PATH=str(tools))

    def go(*hashes):
        return subprocess.run([DASH, os.path.join(GUEST, "join.sh"), str(d),
                               str(tmp_path / ".mbfs-up-5"), "1000", "0", str(t),
                               str(len(data))] + list(hashes),
                              capture_output=True, text=True, timeout=60, env=env)
    p = go(h[0], hashlib.sha256(b"other").hexdigest(), h[2])
    assert p.returncode == 3 and "checksum mismatch" in p.stderr
    p = go(*h)
    assert (p.returncode, p.stderr) == (0, "") and t.read_bytes() == data


def test_join_of_a_missing_target_makes_it_private(run, tmp_path):
    data = os.urandom(2000)
    d = staged(tmp_path, data)
    t = tmp_path / "new"
    p = join(run, d, tmp_path / ".mbfs-up-1", 0, t, data, sums(data))
    assert p.returncode == 0, p.stderr
    assert t.read_bytes() == data and os.stat(t).st_mode & 0o777 == 0o600


def test_join_checksum_mismatch_is_3_and_repeatable(run, tmp_path):
    data = os.urandom(3000)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    t.write_bytes(b"old")
    a = tmp_path / ".mbfs-up-2"
    h = sums(data)
    p = join(run, d, a, 0, t, data, h[:1] + [hashlib.sha256(b"other").hexdigest()] + h[2:])
    assert p.returncode == 3 and "checksum mismatch" in p.stderr
    assert t.read_bytes() == b"old" and d.exists()
    p = join(run, d, a, 0, t, data, h)
    assert p.returncode == 0 and t.read_bytes() == data


def test_join_missing_part_or_short_file_is_3(run, tmp_path):
    data = os.urandom(3000)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    t.write_bytes(b"old")
    a = tmp_path / ".mbfs-up-3"
    h = sums(data)
    # the last call, but the parts before it were never placed (or the
    # joined file went meanwhile)
    p = join(run, d, a, 2, t, data, h[2:])
    assert p.returncode == 3 and "missing" in p.stderr and t.read_bytes() == b"old"
    p = join(run, d, a, 0, None, data, h[:1])
    assert p.returncode == 0
    p = join(run, d, a, 2, t, data, h[2:])
    assert p.returncode == 3 and "fewer than" in p.stderr and t.read_bytes() == b"old"
    # the whole file, but short of its size
    p = join(run, d, a, 0, t, data + b"x", h)
    assert p.returncode == 3 and "not 3001" in p.stderr and t.read_bytes() == b"old"
    os.unlink(d / "p.00001")
    p = join(run, d, a, 0, t, data, h)
    assert p.returncode == 3 and "missing" in p.stderr and t.read_bytes() == b"old"


def times(path):
    st = os.lstat(path)
    return st.st_atime_ns, st.st_mtime_ns


def test_touch_groups_and_failure_marks(run, tmp_path):
    for n in "abcd":
        (tmp_path / n).write_bytes(b"")
    os.symlink("nowhere", tmp_path / "l")
    (tmp_path / "f").write_bytes(b"")
    before_c = times(tmp_path / "c")
    p = run("touch",
            # equal times: one touch for both paths
            "@1000000000.500000000", "@1000000000.500000000", "2", "0 1",
            str(tmp_path / "a"), str(tmp_path / "b"),
            # access time only, before the epoch
            "@-1.500000000", "-", "1", "2", str(tmp_path / "c"),
            # modification time only, of the link itself
            "-", "@1234.000000001", "1", "3", str(tmp_path / "l"),
            # a path that cannot be touched fails its group, and only it
            "@5.000000000", "@6.000000000", "2", "4 5",
            str(tmp_path / "f" / "x"), str(tmp_path / "d"),
            # gone: touch -c leaves it alone, no failure
            "@7.000000000", "@7.000000000", "1", "6", str(tmp_path / "gone"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "!mbfs-touch-failed 4 5\n"
    assert "Not a directory" in p.stderr
    assert times(tmp_path / "a") == times(tmp_path / "b") == (1000000000500000000,) * 2
    assert times(tmp_path / "c") == (-1500000000, before_c[1])
    assert times(tmp_path / "l")[1] == 1234000000001
    assert not (tmp_path / "gone").exists()


def test_touch_of_nothing_does_nothing(run):
    p = run("touch")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_unstage_removes_what_is_there(run, tmp_path):
    d = tmp_path / "up" / "0123"
    d.mkdir(parents=True)
    (d / "p.00000").write_bytes(b"x")
    (tmp_path / ".mbfs-up-0123").write_bytes(b"y")
    p = run("unstage", str(d), str(tmp_path / ".mbfs-up-0123"), str(tmp_path / "gone"))
    assert (p.returncode, p.stdout) == (0, "")
    assert os.listdir(tmp_path) == ["up"] and os.listdir(tmp_path / "up") == []


def test_statfs_prints_blocks_then_inodes(run, tmp_path):
    p = run("statfs", str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("Filesystem") and "1024-blocks" in lines[0]
    p = run("statfs", str(tmp_path / "gone"))
    assert p.returncode == 1 and "No such file" in p.stderr
