"""Random namespace operations through a write-back mount, the same ones on
a local directory: after each sync the mount and the sandbox both hold
exactly the local tree (names, kinds, contents, modes, link targets).
Seeds are fixed, so a failure replays."""
import errno
import os
import random

import pytest

import mbtest
from test_mbfs_helpers import guest_tree_digest, sync, tree_digest, unique

NAMES = ["a", "b", "c", "d.tmp", "e"]


def paths(root, kind):
    """Existing entries of kind ('file', 'dir', 'any') below root, relative."""
    out = []
    for dp, ds, fs in os.walk(root):
        rel = os.path.relpath(dp, root)
        rel = "" if rel == "." else rel
        if kind in ("dir", "any"):
            out += [os.path.join(rel, n) for n in ds if not os.path.islink(os.path.join(dp, n))]
        if kind in ("file", "any"):
            out += [os.path.join(rel, n) for n in fs if not os.path.islink(os.path.join(dp, n))]
    return sorted(out)


def pick_op(rng, local):
    """One operation as (name, args), chosen from what exists locally."""
    dirs = [""] + paths(local, "dir")
    files = paths(local, "file")
    new = os.path.join(rng.choice(dirs), rng.choice(NAMES))
    ops = [("write", (new, b"%d\n" % rng.randrange(10**6) * rng.randrange(1, 50))),
           ("mkdir", (new,)), ("symlink", ("t%d" % rng.randrange(9), new))]
    if files:
        f = rng.choice(files)
        ops += [("write", (f, b"again %d\n" % rng.randrange(10**6))), ("unlink", (f,)),
                ("rename", (f, new)), ("chmod", (f, rng.choice([0o600, 0o644, 0o755]))),
                ("truncate", (f, rng.randrange(0, 8))),
                ("replace", (f, b"replaced %d\n" % rng.randrange(10**6)))]
    if len(dirs) > 1:
        ops += [("rmdir", (rng.choice(dirs[1:]),)), ("rename", (rng.choice(dirs[1:]), new))]
    return rng.choice(ops)


def apply(root, op, args):
    """Do op below root; the errno, or 0."""
    p = lambda rel: os.path.join(root, rel)
    try:
        if op == "write":
            with open(p(args[0]), "wb") as f:
                f.write(args[1])
        elif op == "replace":   # an editor's save: a temporary renamed over
            with open(p(args[0]) + ".swp", "wb") as f:
                f.write(args[1])
            os.rename(p(args[0]) + ".swp", p(args[0]))
        elif op == "mkdir":
            os.mkdir(p(args[0]))
        elif op == "symlink":
            os.symlink(args[0], p(args[1]))
        elif op == "unlink":
            os.unlink(p(args[0]))
        elif op == "rename":
            os.rename(p(args[0]), p(args[1]))
        elif op == "chmod":
            os.chmod(p(args[0]), args[1])
        elif op == "truncate":
            os.truncate(p(args[0]), args[1])
        elif op == "rmdir":
            os.rmdir(p(args[0]))
    except OSError as e:
        return e.errno
    return 0


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_namespace_operations_match_a_local_directory(service, container, mount, tmp_path, seed):
    rng = random.Random(seed)
    local = str(tmp_path / "local")
    os.mkdir(local)
    name = unique("stress")
    remote = mount.path(name)
    os.mkdir(remote)
    done = []
    for step in range(120):
        op, args = pick_op(rng, local)
        want = apply(local, op, args)
        got = apply(remote, op, args)
        done.append((op, args[:1], want))
        # the same outcome; EISDIR/ENOTDIR style differences would be bugs too
        assert got == want, (step, op, args, errno.errorcode.get(got), done[-10:])
        if step % 20 == 19:
            sync(mount)
            mine = tree_digest(local)
            assert tree_digest(remote) == mine, (step, done[-20:])
            assert guest_tree_digest(service, container, "/workspace/" + name) == mine, (step, done[-20:])
