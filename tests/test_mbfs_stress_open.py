"""Random operations with files held open: the namespace operations of
test_mbfs_stress.py, plus fds held across them (read, written, appended,
truncated), utime, and mbexec commands that write, append, rewrite, rename
and remove. Everything is done the same way to a local directory (the
commands run there under sh), and after each step every held fd reads as
its local twin; every few steps fresh opens and stat agree, and after each
sync the sandbox holds exactly the local tree.

A command may rename a file held open (its fds follow it), but does not
remove or replace one: what the mount never read of such a file is gone
with it (mbfs(1), LIMITS). Files held open once they have no name (removed
here, their directory too) stay held.

`make check` runs a few seeds; `make stress` runs more and longer
(MB_STRESS_SEEDS, MB_STRESS_OPS). Seeds are fixed, so a failure replays;
MB_STRESS_SHOW sets how many steps a failure lists, and MB_STRESS_LOG names
a file for the mount's log."""
import errno
import os
import random
import subprocess

import pytest

import mbtest
from test_mbfs_helpers import guest_tree_digest, sync, tree_digest, unique
from test_mbfs_stress import apply, paths, pick_op

SEEDS = [int(s) for s in os.environ.get("MB_STRESS_SEEDS", "11,12,13").split(",")]
OPS = int(os.environ.get("MB_STRESS_OPS", "250"))
MODES = {"r": os.O_RDONLY, "r+": os.O_RDWR, "a": os.O_WRONLY | os.O_APPEND}
MAX_HELD = 4


class Twin:
    """One file held open twice: locally and through the mount."""

    def __init__(self, rel, mode, lfd, rfd):
        self.rel, self.mode, self.lfd, self.rfd = rel, mode, lfd, rfd

    def close(self):
        os.close(self.lfd)
        os.close(self.rfd)


def both(fn, *args):
    """fn(*args), its result or the errno of its OSError."""
    try:
        return fn(*args)
    except OSError as e:
        return ("errno", e.errno)


def held_paths(local, held):
    """The local paths of the files held open."""
    inos = {os.fstat(t.lfd).st_ino for t in held}
    return {rel for rel in paths(local, "file") if os.stat(os.path.join(local, rel)).st_ino in inos}


def command(rng, local, held):
    """A shell command of the kind a build or an agent runs (relative paths,
    so it means the same below both roots). One may rename a file held
    open (its fds follow it); none removes or replaces one: an fd that
    never read its file has nothing of it to keep (mbfs(1), LIMITS)."""
    dirs = [""] + paths(local, "dir")
    busy = held_paths(local, held)
    files = paths(local, "file")
    new = os.path.join(rng.choice(dirs), rng.choice(["a", "b", "c", "log", "out"]))
    n = rng.randrange(10**6)
    cmds = ["printf 'cmd %d\\n' >> %s" % (n, new), "printf 'made %d\\n' > %s" % (n, new)]
    if files:
        f = rng.choice(files)
        cmds += ["printf 'cmd %d\\n' >> %s" % (n, f),
                 "printf 'cmd %d\\n' >> %s; printf 'more\\n' >> %s" % (n, f, f),
                 "printf 'rewritten %d\\n' > %s" % (n, f)]
        if new not in busy and os.path.realpath(os.path.join(local, new)) != \
                os.path.realpath(os.path.join(local, f)):
            cmds += ["mv %s %s" % (f, new)]
        if f not in busy and new not in busy:
            cmds += ["rm -f %s" % f, "cp %s %s.tmp && mv %s.tmp %s" % (f, f, f, new)]
    return rng.choice(cmds)


def run_cmd(service, local, remote, cmd):
    want = subprocess.run(["sh", "-c", cmd], cwd=local, capture_output=True).returncode
    p = mbtest.run_mbexec(service, ["sh", "-c", cmd], cwd=remote)
    return want, p.returncode, p.stderr


def recent(done):
    """The last steps, one a line, for a failure's message."""
    return "\n" + "\n".join(repr(d) for d in done[-int(os.environ.get("MB_STRESS_SHOW", "14")):])


def check_held(held, step, done):
    for t in held:
        lsize = os.fstat(t.lfd).st_size
        rsize = both(lambda fd: os.fstat(fd).st_size, t.rfd)
        assert rsize == lsize, "fstat step %d %s %s: %r, local %d%s" % (step, t.rel, t.mode, rsize, lsize, recent(done))
        if t.mode != "a":
            want = os.pread(t.lfd, lsize + 64, 0)
            got = both(os.pread, t.rfd, lsize + 64, 0)
            assert got == want, "pread step %d %s %s: %r, local %r%s" % (step, t.rel, t.mode, got[:80], want[:80], recent(done))


def same(got, want, where, step, done):
    diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    assert not diff, "step %d: %s differs at %s: %r, local %r%s" % (
        step, where, diff[:3], [got.get(k) for k in diff[:3]], [want.get(k) for k in diff[:3]],
        recent(done))


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_operations_with_open_files_match_a_local_directory(service, container, wb, tmp_path,
                                                                      seed):
    rng = random.Random(seed)
    local = str(tmp_path / "local")
    os.mkdir(local)
    name = unique("stress-open")
    remote = wb.path(name)
    os.mkdir(remote)
    held = []
    done = []
    try:
        for step in range(OPS):
            roll = rng.random()
            files = paths(local, "file")
            if roll < 0.12 and files and len(held) < MAX_HELD:
                rel, mode = rng.choice(files), rng.choice(list(MODES))
                lfd = both(os.open, os.path.join(local, rel), MODES[mode])
                rfd = both(os.open, os.path.join(remote, rel), MODES[mode])
                done.append(("open", rel, mode))
                assert type(lfd) is type(rfd), (step, rel, lfd, rfd, recent(done))
                if isinstance(lfd, int):
                    held.append(Twin(rel, mode, lfd, rfd))
            elif roll < 0.30 and held:
                t = rng.choice(held)
                data = b"fd%d\n" % rng.randrange(10**6) * rng.randrange(1, 30)
                if t.mode == "a":
                    got = (both(os.write, t.lfd, data), both(os.write, t.rfd, data))
                    done.append(("append", t.rel, len(data)))
                elif t.mode == "r+" and rng.random() < 0.2:
                    size = rng.randrange(0, 40)
                    got = (both(os.ftruncate, t.lfd, size), both(os.ftruncate, t.rfd, size))
                    done.append(("ftruncate", t.rel, size))
                elif t.mode == "r+":
                    off = rng.randrange(0, os.fstat(t.lfd).st_size + 8)
                    got = (both(os.pwrite, t.lfd, data, off), both(os.pwrite, t.rfd, data, off))
                    done.append(("pwrite", t.rel, off, len(data)))
                else:
                    got = (None, None)
                assert got[0] == got[1], (step, got, recent(done))
            elif roll < 0.36 and held:
                t = held.pop(rng.randrange(len(held)))
                t.close()
                done.append(("close", t.rel, t.mode))
            elif roll < 0.42 and files:
                rel = rng.choice(files)
                when = 1500000000 + rng.randrange(10**8)
                os.utime(os.path.join(local, rel), (when, when))
                os.utime(os.path.join(remote, rel), (when, when))
                done.append(("utime", rel))
                assert os.stat(os.path.join(remote, rel)).st_mtime == when, (step, recent(done))
            elif roll < 0.52:
                cmd = command(rng, local, held)
                want, got, err = run_cmd(service, local, remote, cmd)
                done.append(("mbexec", cmd, want))
                assert got == want, "step %d %s: rc %d, local %d, %r%s" % (step, cmd, got, want, err, recent(done))
            else:
                op, args = pick_op(rng, local)
                want = apply(local, op, args)
                got = apply(remote, op, args)
                done.append((op,) + tuple(len(a) if isinstance(a, bytes) else a for a in args) + (want,))
                assert got == want, "step %d %s %r: %s, local %s%s" % (step, op, args, errno.errorcode.get(got), errno.errorcode.get(want), recent(done))
            check_held(held, step, done)
            if step % 10 == 9:
                same(tree_digest(remote), tree_digest(local), "the mount", step, done)
            if step % 25 == 24:
                sync(wb)
                same(guest_tree_digest(service, container, "/workspace/" + name),
                     tree_digest(local), "the sandbox", step, done)
    except AssertionError:
        if os.environ.get("MB_STRESS_LOG"):
            with open(os.environ["MB_STRESS_LOG"], "w") as f:
                f.write(wb.log())
        raise
    finally:
        for t in held:
            t.close()
    sync(wb)
    assert tree_digest(remote) == tree_digest(local)
    assert guest_tree_digest(service, container, "/workspace/" + name) == tree_digest(local)
