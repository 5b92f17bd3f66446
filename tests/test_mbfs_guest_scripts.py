"""The scripts mbfs runs on the guest (fuse/guest/*.sh), run here under dash
with the arguments the C side passes, both as files (how a reader runs them
by hand) and as mbfs sends them: `set -- 'ARG'...`, a newline, then the text
embedded by common/embed.sh (comments, blank lines and indentation gone).
The reports checked are the ones fuse/xfer.c, xfer_up.c, touch.c,
prefetch.c and remote.c parse."""
import hashlib
import io
import os
import shutil
import subprocess
import tarfile

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


def stamp(path):
    st = os.stat(path)
    return "%d %d %d" % (st.st_size, st.st_ino, int(st.st_mtime))


def test_split_cuts_the_pieces_asked_for(run, tmp_path):
    data = os.urandom(4500)
    f = tmp_path / "f"
    f.write_bytes(data)
    d = tmp_path / "d"
    # the first round makes DIR and reports the file, then the pieces cut
    p = run("split", str(f), str(d), "1000", "0", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == stamp(f)
    assert p.stdout.split("\n")[1:] == ["1000", "1000", ""]
    assert sorted(os.listdir(d)) == ["p.00000", "p.00001"]
    assert os.stat(d).st_mode & 0o777 == 0o700
    # a later round removes the pieces fetched and cuts the next ones,
    # none past the end
    p = run("split", str(f), str(d), "1000", "2", "10", "p.00000")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == stamp(f).split() + ["1000", "1000", "500"]
    assert sorted(os.listdir(d)) == ["p.00001", "p.00002", "p.00003", "p.00004"]
    got = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)))
    assert got == data[1000:]


def test_split_of_an_empty_file_reports_it_only(run, tmp_path):
    (tmp_path / "e").write_bytes(b"")
    p = run("split", str(tmp_path / "e"), str(tmp_path / "d"), "1000", "0", "4")
    assert (p.returncode, p.stdout) == (0, stamp(tmp_path / "e") + "\n")
    assert os.listdir(tmp_path / "d") == []


def test_split_failures_leave_no_directory(run, tmp_path):
    p = run("split", str(tmp_path / "missing"), str(tmp_path / "d"), "1000", "0", "4")
    assert p.returncode == 1 and "No such file" in p.stderr
    assert not (tmp_path / "d").exists()
    # an existing directory is not ours: left alone, nothing cut into it
    (tmp_path / "f").write_bytes(b"x" * 10)
    (tmp_path / "d").mkdir()
    p = run("split", str(tmp_path / "f"), str(tmp_path / "d"), "1000", "0", "4")
    assert p.returncode == 1 and os.listdir(tmp_path / "d") == []


def test_split_later_round_of_a_file_gone_keeps_the_directory(run, tmp_path):
    # mbfs removes the directory itself when a later round fails
    (tmp_path / "f").write_bytes(b"x" * 2500)
    d = tmp_path / "d"
    assert run("split", str(tmp_path / "f"), str(d), "1000", "0", "1").returncode == 0
    os.unlink(tmp_path / "f")
    p = run("split", str(tmp_path / "f"), str(d), "1000", "1", "2")
    assert p.returncode == 1 and "No such file" in p.stderr
    assert os.listdir(d) == ["p.00000"]


def staged(tmp_path, data, size=1000):
    d = tmp_path / "parts"
    d.mkdir()
    for i in range(0, len(data), size):
        (d / ("p.%05d" % (i // size))).write_bytes(data[i:i + size])
    return d


def sums(data, size=1000):
    return [hashlib.sha256(data[i:i + size]).hexdigest() for i in range(0, len(data), size)]


def join(run, d, a, first, target, data, hashes, size=1000, mode="-"):
    """join.sh as xfer_up.c calls it: target None for a round."""
    return run("join", str(a.parent), str(d), str(a), str(size), str(first),
               "-" if target is None else str(target),
               "-" if target is None else str(len(data)), mode, *hashes)


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


def test_join_refuses_a_symlink_in_the_place_of_its_file(run, tmp_path):
    """A symlink planted where join.sh writes the parts (TMP) would take
    the user's bytes to its target, maybe outside the mount."""
    data = os.urandom(3000)
    d = staged(tmp_path, data)
    victim = tmp_path / "outside"
    victim.write_bytes(b"precious data")
    ws = tmp_path / "ws"
    ws.mkdir()
    a = ws / ".mbfs-up-5"
    os.symlink(str(victim), str(a))
    p = run("join", str(ws), str(d), str(a), "1000", "0", str(ws / "t"), str(len(data)), "-",
            *sums(data))
    assert p.returncode == 4, (p.stdout, p.stderr)
    assert victim.read_bytes() == b"precious data"


def test_apply_unpacks_into_its_stage_even_when_the_name_is_swapped(tmp_path):
    """A sandbox process renames apply.sh's stage (ROOT/.mbfs-up-HEX) away
    the moment it appears and puts a symlink to a directory outside in its
    place: the batch is unpacked into the directory held, or refused, and
    nothing is written outside."""
    import threading
    ws, out, hide, up = (tmp_path / n for n in ("ws", "out", "hide", "up"))
    for x in (ws / "d", out, hide, up):
        x.mkdir(parents=True)
    (out / "list").write_bytes(b"precious\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in (("list", ("d%s/d\nff\n" % ws).encode()), ("0/f", b"USER\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o640
            t.addfile(ti, io.BytesIO(data))
    stop = threading.Event()
    swaps = []

    def racer():
        while not stop.is_set():
            for n in os.listdir(str(ws)):
                if n.startswith(".mbfs-up-") and not os.path.islink(str(ws / n)):
                    try:
                        os.rename(str(ws / n), str(hide / str(len(swaps))))
                        os.symlink(str(out), str(ws / n))
                        swaps.append(n)
                    except OSError:
                        pass
    th = threading.Thread(target=racer)
    th.start()
    try:
        for i in range(40):
            (up / "b.00000").write_bytes(buf.getvalue())
            subprocess.run([DASH, os.path.join(GUEST, "apply.sh"), str(up / "b"), "1",
                            "%s/.mbfs-up-%x" % (ws, i), "-"], capture_output=True, timeout=60)
            if (up / "b.done").exists():
                (up / "b.done").unlink()
            assert sorted(os.listdir(str(out))) == ["list"], (i, os.listdir(str(out)))
            assert (out / "list").read_bytes() == b"precious\n"
    finally:
        stop.set()
        th.join()
    assert swaps


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
    for t in ("cat", "truncate", "stat", "chmod", "mv", "rm", "cut", "sha256sum"):
        os.symlink(shutil.which(t), tools / t)
    data = os.urandom(2500)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    h = sums(data)
    env = dict(os.environ, LC_ALL="C", PATH=str(tools))

    def go(*hashes):
        return subprocess.run([DASH, os.path.join(GUEST, "join.sh"), str(tmp_path), str(d),
                               str(tmp_path / ".mbfs-up-5"), "1000", "0", str(t),
                               str(len(data)), "-"] + list(hashes),
                              capture_output=True, text=True, timeout=60, env=env)
    p = go(h[0], hashlib.sha256(b"other").hexdigest(), h[2])
    assert p.returncode == 3 and "checksum mismatch" in p.stderr
    p = go(*h)
    assert (p.returncode, p.stderr) == (0, "") and t.read_bytes() == data


def test_join_gives_the_mode_asked_for(run, tmp_path):
    """A file created here: its mode comes with the last call, whatever
    the target had (no chmod request after)."""
    data = os.urandom(2500)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    t.write_bytes(b"old")
    os.chmod(t, 0o600)
    h = sums(data)
    a = tmp_path / ".mbfs-up-6"
    p = join(run, d, a, 0, None, data, h[:1], mode="755")
    assert p.returncode == 0, p.stderr
    assert os.stat(a).st_mode & 0o777 == 0o600 and os.stat(t).st_mode & 0o777 == 0o600
    p = join(run, d, a, 1, t, data, h[1:], mode="755")
    assert p.returncode == 0, p.stderr
    assert t.read_bytes() == data and os.stat(t).st_mode & 0o777 == 0o755


def test_join_repeated_after_a_longer_round_cuts_it_back(run, tmp_path):
    """A call repeated after its answer was lost, or one after a round
    that placed more: what lies past FIRST's parts is written anew."""
    data = os.urandom(4000)
    d = staged(tmp_path, data)
    t = tmp_path / "target"
    h = sums(data)
    a = tmp_path / ".mbfs-up-7"
    a.write_bytes(data[:2000] + b"junk" * 500)
    p = join(run, d, a, 2, t, data, h[2:])
    assert p.returncode == 0, p.stderr
    assert t.read_bytes() == data


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
    p = run("touch", str(tmp_path),
            # equal times: one touch for both paths
            "@1000000000.500000000", "@1000000000.500000000", "2", "0 1",
            str(tmp_path / "a"), str(tmp_path / "b"),
            # access time only, before the epoch
            "@-1.500000000", "-", "1", "2", str(tmp_path / "c"),
            # modification time only, of the link itself
            "-", "@1234.000000001", "1", "3", str(tmp_path / "l"),
            # a path that cannot be touched fails, and only it (its
            # group's paths in other directories are touched one each)
            "@5.000000000", "@6.000000000", "2", "4 5",
            str(tmp_path / "f" / "x"), str(tmp_path / "d"),
            # gone: touch -c leaves it alone, no failure
            "@7.000000000", "@7.000000000", "1", "6", str(tmp_path / "gone"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "!mbfs-touch-failed 4\n"
    assert "Not a directory" in p.stderr
    assert times(tmp_path / "d") == (5000000000, 6000000000)
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


def unpack_pieces(d):
    import io
    import tarfile
    data = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)))
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def pack_tree(tmp_path):
    root = tmp_path / "root"
    for rel, data in [("a/f1", b"one"), ("a/f2", b"two"), ("a/sub/g", b"gee"),
                      ("b/h", b"aitch"), ("top", b"top"),
                      ("a/with space", b"s"), ("a/new\nline", b"n"), ("a/-dash", b"d"),
                      ("a/" + "L" * 150, b"long"), ("a/odd\x01byte", b"odd"),
                      ("a/.mbfs-up-x", b"staging"), ("a/.mbfs-up-d/inside", b"staging"),
                      ("c/x", b"excluded")]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "a" / "big").write_bytes(b"x" * (256 * 1024 + 1))
    os.symlink("f1", str(root / "a" / "link"))
    os.symlink(str(root / "b"), str(root / "a" / "dirlink"))
    return root


def test_pack_archives_the_small_files_of_a_tree(run, tmp_path):
    root = pack_tree(tmp_path)
    d = tmp_path / "d"
    p = run("pack", str(root), "a", str(d), "1000", "8388608", "4000", "-", "c", "gone")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    now, files, cut, ls = lines[0].split()
    assert abs(int(now) - int(__import__("time").time())) < 60
    sizes = [int(x) for x in lines[1:] if x]
    assert (int(files), cut) == (9, "0")
    # the listings end the pieces: 9 NUL-ended fields an entry, every entry
    # of the tree but upload staging
    data = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)))
    fields = data[len(data) - int(ls):].split(b"\0")
    assert fields[-1] == b"" and (len(fields) - 1) % 9 == 0
    recs = [fields[i:i + 9] for i in range(0, len(fields) - 1, 9)]
    entries = {(r[6].decode(), r[7].decode()): r for r in recs}
    assert ("./a", "link") in entries and entries[("./a", "link")][8] == b"f1"
    assert entries[("./a", "link")][0] == b"l"
    assert entries[("./a", "big")][4] == str(256 * 1024 + 1).encode()
    assert entries[(".", "c")][0] == b"d" and (".", "c") in entries
    assert ("./a", "odd\x01byte") in entries and ("./a", "new\nline") in entries
    assert not any(n.startswith(".mbfs-up") or "mbfs-up" in dn for dn, n in entries)
    assert sizes[:-1] == [1000] * (len(sizes) - 1) and 0 < sizes[-1] <= 1000
    assert sorted(os.listdir(d)) == ["p.%05d" % i for i in range(len(sizes))]
    assert os.stat(d).st_mode & 0o777 == 0o700
    members = unpack_pieces(d)
    names = [n for n, _ in members]
    # FIRST's own files first, each once; no staging, link, big file, byte 001
    # or excluded subtree
    first = {"./a/f1", "./a/f2", "./a/with space", "./a/new\nline", "./a/-dash",
             "./a/" + "L" * 150}
    assert set(names[:len(first)]) == first
    assert sorted(names) == sorted(first | {"./a/sub/g", "./b/h", "./top"})
    assert dict(members)["./a/" + "L" * 150] == b"long"
    assert dict(members)["./a/new\nline"] == b"n"


def test_pack_stops_at_the_caps_with_first_files_first(run, tmp_path):
    root = pack_tree(tmp_path)
    d = tmp_path / "d"
    p = run("pack", str(root), "b", str(d), "1048576", "8388608", "2", "-")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0].split()[1:] == ["2", "1", "0"]
    names = [n for n, _ in unpack_pieces(d)]
    assert names[0] == "./b/h" and len(names) == 2
    shutil.rmtree(str(d))
    # the byte cap: a header and a block per file
    p = run("pack", str(root), ".", str(d), "1048576", "3072", "100", "-")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0].split()[1:] == ["3", "1", "0"]


def test_pack_gives_a_small_walks_listings_in_its_answer(run, tmp_path):
    """MAXFILES 0 (a walk): up to 384 KiB of listings come in the answer,
    in base64 after an "@", and leave no piece; more go in pieces."""
    import base64
    root = pack_tree(tmp_path)
    d = tmp_path / "d"
    p = run("pack", str(root), ".", str(d), "1000", "8388608", "0", "-")
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.split("\n")[:2]
    assert first.split()[1:] == ["0", "0", "0"] and second.startswith("@"), p.stdout
    assert not d.exists()
    fields = base64.b64decode(second[1:]).split(b"\0")
    assert fields[-1] == b"" and (len(fields) - 1) % 9 == 0
    names = {fields[i + 7] for i in range(0, len(fields) - 1, 9)}
    assert b"a" in names and b"b" in names, names
    # a large tree's listings go in pieces, as before
    big = tmp_path / "big"
    big.mkdir()
    for i in range(5000):
        (big / ("f%04d-%s" % (i, "x" * 60))).write_bytes(b"")
    p = run("pack", str(big), ".", str(d), "1048576", "8388608", "0", "-")
    assert p.returncode == 0, p.stderr
    head = p.stdout.split("\n")
    assert int(head[0].split()[3]) > 393216 and not any(l.startswith("@") for l in head)
    assert d.exists()
    shutil.rmtree(str(d))


def test_pack_of_nothing_leaves_no_directory(run, tmp_path):
    (tmp_path / "empty").mkdir()
    d = tmp_path / "d"
    p = run("pack", str(tmp_path / "empty"), ".", str(d), "1000", "8388608", "4000", "-")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[1:] == ["0", "0", "0"]
    assert not d.exists()
    p = run("pack", str(tmp_path / "missing"), ".", str(d), "1000", "8388608", "4000", "-")
    assert p.returncode == 1 and not d.exists()
    # an existing directory is not ours: left alone
    d.mkdir()
    (tmp_path / "empty" / "f").write_bytes(b"f")
    p = run("pack", str(tmp_path / "empty"), ".", str(d), "1000", "8388608", "4000", "-")
    assert p.returncode == 1 and os.listdir(str(d)) == []


def test_pack_removes_the_previous_pieces_first(run, tmp_path):
    prev = "/tmp/.mbfs-dl-test%d" % os.getpid()
    os.makedirs(prev + "/x", exist_ok=True)
    other = tmp_path / "other"
    other.mkdir()
    try:
        # even when it fails itself; and never a name that is not its own
        p = run("pack", str(tmp_path / "missing"), ".", str(tmp_path / "d"), "1000", "8388608",
                "4000", prev)
        assert p.returncode == 1 and not os.path.exists(prev)
        p = run("pack", str(tmp_path / "missing"), ".", str(tmp_path / "d"), "1000", "8388608",
                "4000", str(other))
        assert p.returncode == 1 and other.is_dir()
    finally:
        shutil.rmtree(prev, ignore_errors=True)


def apply_batch(run, tmp_path, lines, files):
    """Run apply.sh on one batch: list LINES, FILES {(group, name): bytes}."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in [("list", ("\n".join(lines) + "\n").encode())] + \
                [("%d/%s" % k, v) for k, v in files.items()]:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o640
            t.addfile(ti, io.BytesIO(data))
    parts = tmp_path / "up"
    parts.mkdir(exist_ok=True)
    (parts / "b.00000").write_bytes(buf.getvalue())
    # PREV names a report (none there): "-", a mount's first batch, would
    # sweep this machine's /tmp for staging
    return run("apply", str(parts / "b"), "1", str(tmp_path / "root" / ".mbfs-up-1"),
               str(parts / "none.done"))


@pytest.fixture(params=["perl", "no-perl"])
def apply_env(request, tmp_path, monkeypatch):
    """apply.sh renames with perl when the guest has it, else with mv: a PATH
    of every program here but perl runs the second way."""
    if request.param == "no-perl":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for d in ("/usr/local/bin", "/usr/bin", "/bin"):
            for name in os.listdir(d) if os.path.isdir(d) else []:
                if not name.startswith("perl") and not (bin_dir / name).exists():
                    os.symlink(os.path.join(d, name), bin_dir / name)
        monkeypatch.setenv("PATH", str(bin_dir))
    return request.param


def test_apply_makes_new_directories_in_one_mkdir_a_mode_and_fails_a_batch_whole(run, tmp_path, apply_env):
    root = tmp_path / "root"
    (root / "taken").mkdir(parents=True)
    r = str(root)
    p = apply_batch(run, tmp_path, [
        "m0750 %s/new1" % r, "m0750 %s/new1/sub" % r,   # one mkdir, parent first
        "m0755 %s/taken" % r,                            # someone else's
        "m0700 %s/missing/x" % r, "m0700 %s/new2" % r,   # one mkdir that fails
        "m0700 %s/new2/below" % r,
        "d%s/new1/sub" % r, "fa", "d%s/new2" % r, "fb", "d%s/taken" % r, "fc",
    ], {(0, "a"): b"A", (1, "b"): b"B", (2, "c"): b"C"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[:2] == ["y 2 File exists", "y 3 No such file or directory"], out
    assert out[2] == "y 4 No such file or directory", out
    assert out[3].startswith("y 5 "), out
    assert [x.split()[:2] for x in out[4:6]] == [["x", "1"], ["x", "2"]], out
    assert out[-1] == "ok 3"
    assert (root / "new1" / "sub" / "a").read_bytes() == b"A"
    assert oct(os.stat(root / "new1").st_mode & 0o777) == oct(0o750)
    assert oct(os.stat(root / "new1" / "sub").st_mode & 0o777) == oct(0o750)
    # mkdir made new2 before it failed on missing/x: it takes nothing
    assert os.listdir(root / "taken") == []
    assert not (root / "new2" / "b").exists()


def test_apply_after_a_lost_answer_takes_its_own_directory_and_bytes(run, tmp_path, apply_env):
    """A batch sent again because the answer to the first was lost: an "M"
    line takes a real directory there as made (an "m" line does not); a
    file whose base no longer holds but which holds the same bytes as the
    one sent goes in place, one with other bytes is a conflict."""
    root = tmp_path / "root"
    (root / "mine").mkdir(parents=True)
    (root / "mine" / "same").write_bytes(b"sent before")
    (root / "mine" / "other").write_bytes(b"theirs")
    (root / "theirs").mkdir()
    os.symlink(str(tmp_path), root / "linked")
    (root / "foreign").mkdir()              # "M", but someone else's name in it
    (root / "foreign" / "x").write_bytes(b"theirs")
    r = str(root)
    p = apply_batch(run, tmp_path, [
        "M0750 %s/mine" % r, "m0750 %s/theirs" % r, "M0750 %s/linked" % r,
        "M0750 %s/foreign" % r,
        "d%s/mine" % r, "b1 1", "fsame", "b1 1", "fother", "d%s/foreign" % r, "fy",
    ], {(0, "same"): b"sent before", (0, "other"): b"mine", (1, "y"): b"Y"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[:3] == ["y 1 File exists", "y 2 File exists", "y 3 File exists"], out
    assert out[3].startswith("x 1 conflict"), out
    assert out[4].startswith("x 2 "), out
    assert not (root / "foreign" / "y").exists()
    assert out[-1] == "ok 3", out
    assert (root / "mine" / "same").read_bytes() == b"sent before"
    assert (root / "mine" / "other").read_bytes() == b"theirs"


def test_apply_renames_over_files_never_into_directories_or_symlinks(run, tmp_path, apply_env):
    """A file replaces a file; never a directory; a symlink only where
    rename(2) replaces the link itself (perl), never by going through it."""
    root = tmp_path / "root"
    (root / "d" / "isdir").mkdir(parents=True)
    (root / "d" / "old").write_bytes(b"old")
    os.symlink("/etc/passwd", root / "d" / "link")
    (root / "d2").mkdir()
    r = str(root)
    p = apply_batch(run, tmp_path, ["d%s/d" % r, "fold", "fisdir", "flink", "fnew",
                                    "d%s/d2" % r, "fx", "t@1577934245"],
                    {(0, "old"): b"new", (0, "isdir"): b"I", (0, "link"): b"L",
                     (0, "new"): b"N", (1, "x"): b"X"})
    assert p.returncode == 0, p.stderr
    perl = apply_env == "perl"
    assert p.stdout.splitlines() == ["x 1 not a regular file"] + \
        ([] if perl else ["x 2 not a regular file"]) + ["ok 5"]
    assert (root / "d" / "old").read_bytes() == b"new"
    assert (root / "d" / "new").read_bytes() == b"N"
    assert os.listdir(root / "d" / "isdir") == []
    if perl:   # the link itself replaced, its target untouched
        assert not os.path.islink(root / "d" / "link")
        assert (root / "d" / "link").read_bytes() == b"L"
    else:
        assert os.readlink(root / "d" / "link") == "/etc/passwd"
    assert (root / "d2" / "x").read_bytes() == b"X"
    assert int(os.stat(root / "d2").st_mtime) == 1577934245
    assert not (root / ".mbfs-up-1").exists()


def test_apply_never_goes_through_a_directory_swapped_for_a_symlink(run, tmp_path, apply_env):
    """Another client replaced sub (below the mounted directory) by a symlink
    to a directory elsewhere: nothing is made or moved through it, at any
    depth; the mounted directory itself may be a symlink."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    real = tmp_path / "real"
    real.mkdir()
    root = tmp_path / "root"
    os.symlink(real, root)   # the mounted directory may be one
    os.symlink(elsewhere, real / "sub")
    r = str(root)
    p = apply_batch(run, tmp_path, [
        "m0755 %s/sub/nd" % r, "m0755 %s/ok" % r,
        "d%s/sub/deep" % r, "fa", "d%s/sub/nd" % r, "fb", "d%s/ok" % r, "fc",
    ], {(0, "a"): b"A", (1, "b"): b"B", (2, "c"): b"C"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "y 0 a directory above it is a symlink",
        "x 0 its directory is a symlink",
        "x 1 its directory could not be made",
        "ok 3"], p.stdout
    assert sorted(os.listdir(elsewhere)) == ["deep"] and os.listdir(elsewhere / "deep") == []
    assert (real / "ok" / "c").read_bytes() == b"C"


def test_apply_replaces_a_file_only_while_it_has_its_base(run, tmp_path, apply_env):
    """A "b" line: the sandbox's file must still be what the mount's copy
    was made on (size and whole-second mtime, or nothing there); a file
    changed or made meanwhile stays, and the report says conflict."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    for name, data in (("same", b"12345"), ("changed", b"123456"), ("made", b"theirs")):
        (root / "d" / name).write_bytes(data)
        os.utime(root / "d" / name, (1600000000, 1600000000))
    r = str(root)
    p = apply_batch(run, tmp_path, ["d%s/d" % r, "b5 1600000000", "fsame", "b5 1600000000", "fchanged",
                                    "b-", "fmade", "b-", "fabsent", "fany"],
                    {(0, "same"): b"ours1", (0, "changed"): b"ours2", (0, "made"): b"ours3",
                     (0, "absent"): b"ours4", (0, "any"): b"ours5"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "ok 5"
    assert sorted(l.split(" ", 3)[1] + " " + l.split(" ", 3)[2] for l in lines[:-1]) == \
        ["1 conflict:", "2 conflict:"], lines
    assert (root / "d" / "same").read_bytes() == b"ours1"
    assert (root / "d" / "changed").read_bytes() == b"123456"
    assert (root / "d" / "made").read_bytes() == b"theirs"
    assert (root / "d" / "absent").read_bytes() == b"ours4"
    assert (root / "d" / "any").read_bytes() == b"ours5"


def test_apply_removes_first_in_order_never_through_a_symlink(run, tmp_path, apply_env):
    """r and R lines run before everything else, in order: a file, a
    symlink (never its target), a directory emptied just before; one gone
    already is done; a base that no longer holds, a directory, a non-empty
    directory and a way through a swapped symlink are refused, each with
    its index."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim").write_bytes(b"keep")
    root = tmp_path / "root"
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "f").write_bytes(b"f")
    (root / "d" / "g").write_bytes(b"12345")
    os.utime(root / "d" / "g", (1600000000, 1600000000))
    (root / "d" / "h").write_bytes(b"h")
    os.symlink(str(elsewhere / "victim"), root / "d" / "link")
    (root / "full").mkdir()
    (root / "full" / "x").write_bytes(b"x")
    os.symlink(str(elsewhere), root / "swapped")
    r = str(root)
    p = apply_batch(run, tmp_path, [
        "r%s/d/sub/f" % r, "R%s/d/sub" % r,           # 0, 1: emptied, then removed
        "b5 1600000000", "r%s/d/g" % r,               # 2: its base holds
        "b1 1", "r%s/d/h" % r,                        # 3: changed since: a conflict
        "r%s/d/link" % r,                             # 4: the link, not its target
        "r%s/d/gone" % r,                             # 5: gone already
        "r%s/full" % r, "R%s/full" % r,               # 6, 7: a directory; not empty
        "r%s/swapped/victim" % r,                     # 8: through a symlink
        "m0755 %s/d/sub" % r,                         # made again after its removal
        "d%s/d/sub" % r, "fnew",
    ], {(0, "new"): b"N"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert [x.split()[1] for x in out if x.startswith("z ")] == ["3", "6", "7", "8"], out
    assert [x for x in out if x.startswith("z 3 ")][0].startswith("z 3 conflict"), out
    assert out[-1] == "ok 1", out
    assert sorted(os.listdir(root / "d")) == ["h", "sub"]
    assert os.listdir(root / "d" / "sub") == ["new"]
    assert (elsewhere / "victim").read_bytes() == b"keep"
    assert (root / "full" / "x").exists()


def test_apply_keeps_the_mode_of_the_file_replaced_after_a_k_line(run, tmp_path, apply_env):
    """A replay after a crash does not know the sandbox's mode: a "k" line
    keeps the replaced file's (its base holds), and a file with nothing to
    replace takes its member's (0640 here)."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    for n, mode in (("a", 0o600), ("b", 0o755), ("c", 0o604)):
        (root / "d" / n).write_bytes(b"12345")
        os.chmod(root / "d" / n, mode)
        os.utime(root / "d" / n, (1600000000, 1600000000))
    r = str(root)
    p = apply_batch(run, tmp_path, ["d%s/d" % r, "b5 1600000000", "k", "fa", "k", "b5 1600000000",
                                    "fb", "fc", "k", "fnew"],
                    {(0, "a"): b"A", (0, "b"): b"B", (0, "c"): b"C", (0, "new"): b"N"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "ok 4", p.stdout
    modes = {n: os.stat(root / "d" / n).st_mode & 0o7777 for n in ("a", "b", "c", "new")}
    assert modes == {"a": 0o600, "b": 0o755, "c": 0o640, "new": 0o640}, modes
    assert (root / "d" / "a").read_bytes() == b"A"


def test_apply_moves_in_order_with_the_removals_never_through_a_symlink(run, tmp_path, apply_env):
    """i, v and V lines rename a file over a name, in order with the r lines:
    a chain of moves (a swap through a third name), a move over a file, a
    move of a symlink itself; a gone source, a directory on either side and
    a way through a swapped symlink are refused with their index; two
    names of one file are left as they are ("w": rename(2) does that)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim").write_bytes(b"keep")
    root = tmp_path / "root"
    (root / "d" / "dir").mkdir(parents=True)
    for n in ("x", "y", "over", "old"):
        (root / "d" / n).write_bytes(n.encode())
    os.symlink("x", root / "d" / "ln")
    os.link(root / "d" / "old", root / "d" / "hard")
    os.symlink(str(elsewhere), root / "swapped")
    d = str(root / "d")
    r = str(root)

    def mv(i, a, b):
        return ["i%016x -" % i, "v" + a, "V" + b]
    p = apply_batch(run, tmp_path,
                    mv(1, d + "/x", d + "/t") + mv(2, d + "/y", d + "/x") +      # 0-2: a swap
                    mv(3, d + "/t", d + "/y") +
                    mv(4, d + "/over", d + "/old2") +                            # 3: a plain move
                    ["r%s/old2" % d] +                                           # 4: then removed
                    mv(5, d + "/ln", d + "/ln2") +                               # 5: the link itself
                    mv(6, d + "/gone", d + "/g") +                               # 6: gone
                    mv(7, d + "/dir", d + "/dir2") +                             # 7: a directory
                    mv(8, d + "/y", d + "/dir") +                                # 8: over a directory
                    mv(9, d + "/x", r + "/swapped/victim") +                     # 9: through a symlink
                    mv(10, d + "/old", d + "/hard") +                            # 10: one file
                    ["d%s" % d, "fnew"], {(0, "new"): b"N"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert [x.split()[1] for x in out if x.startswith("z ")] == ["6", "7", "8", "9"], out
    assert [x for x in out if x.startswith("w ")] == ["w 10"], out
    assert out[-1] == "ok 1", out
    assert sorted(os.listdir(root / "d")) == ["dir", "hard", "ln2", "new", "old", "x", "y"]
    assert (root / "d" / "x").read_bytes() == b"y"
    assert (root / "d" / "y").read_bytes() == b"x"
    assert os.readlink(root / "d" / "ln2") == "x"
    assert (elsewhere / "victim").read_bytes() == b"keep"
    # the moves done are in the ledger of the batch directory
    assert sorted((tmp_path / "up" / "moves").read_text().split()) == \
        ["%016x" % i for i in (1, 2, 3, 4, 5)], out


def test_apply_gives_files_modes_in_order_never_through_a_symlink(run, tmp_path, apply_env):
    """p lines chmod a file in order with the moves (after a move, its new
    name); a file gone, a symlink in its place and a way through a swapped
    symlink are refused with their index, the symlink's target untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim").write_bytes(b"keep")
    os.chmod(elsewhere / "victim", 0o644)
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a").write_bytes(b"a")
    (root / "d" / "b").write_bytes(b"b")
    os.symlink(str(elsewhere / "victim"), root / "d" / "ln")
    os.symlink(str(elsewhere), root / "swapped")
    (root / "d" / "dir").mkdir()
    os.link(elsewhere / "victim", root / "d" / "hard")
    (root / "d" / "e").write_bytes(b"12345")
    os.utime(root / "d" / "e", (1600000000, 1600000000))
    d, r = str(root / "d"), str(root)
    p = apply_batch(run, tmp_path, [
        "p0600 %s/a" % d,                                     # 0
        "i00000000000000b1 -", "v%s/b" % d, "V%s/c" % d,      # 1
        "p0751 %s/c" % d,                                     # 2: its new name
        "p0600 %s/gone" % d,                                  # 3: gone
        "p0777 %s/ln" % d,                                    # 4: a symlink
        "p0777 %s/swapped/victim" % r,                        # 5: through a symlink
        "p0700 %s/dir" % d,                                   # 6: a directory
        "p0777 %s/hard" % d,                                  # 7: other links
        "b5 1600000001", "p0700 %s/e" % d,                    # 8: not its base
    ], {})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert [x.split()[1] for x in out if x.startswith("z ")] == ["3", "4", "5", "6", "7", "8"], out
    assert os.stat(root / "d" / "dir").st_mode & 0o7777 == 0o755
    assert os.stat(root / "d" / "e").st_mode & 0o7777 == 0o644
    assert os.stat(root / "d" / "a").st_mode & 0o7777 == 0o600
    assert os.stat(root / "d" / "c").st_mode & 0o7777 == 0o751
    assert os.stat(elsewhere / "victim").st_mode & 0o7777 == 0o644


def test_apply_takes_a_batch_of_names_in_the_command(run, tmp_path, apply_env):
    """A batch of names only (no file) comes in the command, no PUT: NPARTS
    "-" and the list as the fifth argument. The batch directory is made
    when missing; a rerun prints the first run's report and does nothing
    again."""
    root = tmp_path / "root"
    (root / "d" / "sub").mkdir(parents=True)
    for n in ("f", "g"):
        (root / "d" / "sub" / n).write_bytes(n.encode())
    (root / "d" / "x").write_bytes(b"x")
    d = str(root / "d")
    batch = tmp_path / ("wb-%s" % os.urandom(4).hex())   # not made yet
    lines = "r%s/sub/f\nr%s/sub/g\nR%s/sub\nR%s/gone\ni00000000000000c1 -\nv%s/x\nV%s/y\n" % (
        d, d, d, d, d, d)
    # PREV a report that is not there ("-" would sweep this machine's /tmp)
    args = ("apply", str(batch / "b"), "-", str(root / ".mbfs-up-9"), str(tmp_path / "none.done"),
            lines)
    p = run(*args)
    assert p.returncode == 0 and p.stdout.splitlines() == ["ok 0"], (p.stdout, p.stderr)
    assert os.listdir(root / "d") == ["y"]
    assert (batch / "moves").read_text() == "00000000000000c1\n"
    (root / "d" / "x").write_bytes(b"again")   # a rerun moves nothing
    p = run(*args)
    assert p.returncode == 0 and p.stdout.splitlines() == ["ok 0"], (p.stdout, p.stderr)
    assert sorted(os.listdir(root / "d")) == ["x", "y"]
    # a /tmp that a sandbox process swapped for a link: nothing made there
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), tmp_path / "tmp")
    p = run("apply", str(tmp_path / "tmp" / "wb-1" / "b"), "-", str(root / ".mbfs-up-8"),
            str(tmp_path / "none.done"), "R%s/gone\n" % d)
    assert p.returncode == 5, (p.stdout, p.stderr)
    assert os.listdir(real) == []


def test_apply_does_no_move_twice(run, tmp_path, apply_env):
    """A rerun after a lost answer comes in a new batch (another archive,
    the same batch directory), a replay after a crash in another batch
    directory naming the killed mount's: the ledger of either says which
    moves are done, and those are not done again (x and y would swap
    back, or t's content would go)."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    for n in ("x", "y"):
        (root / "d" / n).write_bytes(n.encode())
    d = str(root / "d")
    swap = ["iaaaaaaaaaaaaaa01 -", "v%s/x" % d, "V%s/t" % d,
            "iaaaaaaaaaaaaaa02 -", "v%s/y" % d, "V%s/x" % d,
            "iaaaaaaaaaaaaaa03 -", "v%s/t" % d, "V%s/y" % d]
    for _ in range(2):
        p = apply_batch(run, tmp_path, swap, {})
        assert p.returncode == 0 and p.stdout.splitlines() == ["ok 0"], (p.stdout, p.stderr)
        assert (root / "d" / "x").read_bytes() == b"y"
        assert (root / "d" / "y").read_bytes() == b"x"
        assert sorted(os.listdir(root / "d")) == ["x", "y"]
    # a replay: another batch directory; the killed mount's is named
    killed = "/tmp/.mbfs-wb-%s" % os.urandom(6).hex()
    os.makedirs(killed)
    try:
        shutil.copy(tmp_path / "up" / "moves", killed + "/moves")
        os.unlink(tmp_path / "up" / "moves")
        p = apply_batch(run, tmp_path, [x.replace(" -", " " + killed) if x.startswith("i") else x
                                        for x in swap], {})
        assert p.returncode == 0 and p.stdout.splitlines() == ["ok 0"], (p.stdout, p.stderr)
        assert (root / "d" / "x").read_bytes() == b"y"
        assert sorted(os.listdir(root / "d")) == ["x", "y"]
    finally:
        shutil.rmtree(killed)


def guest_id(path):
    """What follow.sh says of a file: device, inode and birth time."""
    return subprocess.check_output(["stat", "-c", "%d:%i:%.9W", str(path)]).decode().strip()


def test_follow_finds_the_files_it_knew_under_their_new_names(run, tmp_path):
    """A file known by its device, inode and birth time, no longer under
    its name: its new name is said, with what is there now; one gone, or
    replaced, or a bad id, is not looked for past its own line."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    (tmp_path / "c").write_bytes(b"c")
    ida, idb, idc = (guest_id(tmp_path / x) for x in "abc")
    os.rename(tmp_path / "a", tmp_path / "sub" / "moved")
    os.rename(tmp_path / "b", tmp_path / "c")   # c replaced, b gone
    r = run("follow", str(tmp_path), str(tmp_path / "a"), ida, str(tmp_path / "c"), idc,
            str(tmp_path / "b"), "1:2; touch x", str(tmp_path / "sub" / "moved"), ida)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0] == "-" and lines[1].endswith(" " + idb) and lines[2] == "-", r.stdout
    assert lines[3].endswith(" " + ida), r.stdout
    assert lines[4:] == ["> %s %s" % (ida, tmp_path / "sub" / "moved"), "="], r.stdout
    assert not os.path.exists("x")


def test_follow_lists_files_and_directories(run, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "f").write_bytes(b"abc")
    (d / " lead").write_bytes(b"")
    (d / "sub").mkdir()
    os.symlink("t a r", str(d / "ln"))
    os.utime(str(d / "f"), (1500000000, 1500000000))
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "new\nline").write_bytes(b"")
    os.symlink(str(d), str(tmp_path / "dlink"))
    r = run("follow", str(tmp_path), str(d / "f"), "-", str(tmp_path / "none"), "-",
            "-d", str(d), str(odd), str(tmp_path / "dlink"), str(tmp_path / "nodir"))
    assert r.returncode == 0, r
    lines = r.stdout.split("\n")
    assert lines[:4] == ["3 1500000000 %s" % guest_id(d / "f"), "-", "=", "@"], r.stdout
    assert lines[-2:] == [".", ""], r.stdout
    body = lines[4:-2]
    assert "! %s" % (tmp_path / "dlink") in body and "! %s" % (tmp_path / "nodir") in body
    assert "! %s" % odd in body, r.stdout
    entries = {l.split(" ", 7)[7]: l.split(" ", 7)[:2] for l in body
               if l[:4] in ("1 f ", "1 d ", "1 l ", "0 d ")}
    assert entries == {str(d / "sub"): ["1", "d"], str(d / " lead"): ["1", "f"],
                       str(d / "f"): ["1", "f"], str(d / "ln"): ["1", "l"],
                       str(d): ["0", "d"], str(odd): ["0", "d"]}, r.stdout
    # seconds with find's fraction
    assert [l.split(" ")[6] for l in body if l.endswith(" %s" % (d / "f"))] == \
        ["1500000000.0000000000"], r.stdout
    link = [l for l in body if l.startswith("1 l ")][0]
    assert body[body.index(link) + 1] == "t a r"
