# The root filesystem of an isolated guest, built by its PID 1 (real root, in
# fresh mount/PID namespaces) before anything of the guest runs: the host's system
# directories bind-mounted read-only, writable per-generation /root, /tmp, /var,
# and /workspace for images that have one, fresh /proc and /sys, a minimal /dev
# with its own devpts, then pivot_root into it.

import ctypes
import os
import platform
import re

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

# Read-only views of the host; a symlink (merged /usr) is copied as a symlink.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
# Writable directories every image has, owned by guest root: (path, mode).
OWN_DIRS = (("root", 0o700), ("tmp", 0o1777), ("var", 0o755), ("var/tmp", 0o1777), ("home", 0o755),
            ("mnt", 0o755), ("media", 0o755), ("srv", 0o755), ("run", 0o755))
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)


def _fail(what):
    err = ctypes.get_errno()
    raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) != 0:
        _fail("mount %s on %s" % (src or fstype, dst))


def _bind_ro(src, dst):
    mount(src, dst, None, MS_BIND)
    # A bind mount ignores MS_RDONLY until remounted; nosuid so that a host
    # setuid binary cannot raise a guest process above guest root.
    mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def detach_fuse_mounts():
    """`unshare --mount` copied every FUSE mount of the host (mbfs mounts of other
    tests among them); a copy would keep that daemon's mount alive after the user
    unmounts it, so detach them all before anything else. Best effort."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return
    targets = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype = right.split(" ", 1)[0]
        if fstype.startswith("fuse") and fstype != "fusectl":
            mnt = left.split(" ")[4]
            targets.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mnt))
    for t in sorted(targets, key=len, reverse=True):
        _libc.umount2(t.encode(), MNT_DETACH)


def _own_dir(path, mode, uid):
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, uid)
    os.chmod(path, mode)


def _dev(root, uid):
    dev = root + "/dev"
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k,uid=%d,gid=%d" % (uid, uid))
    for name in DEVICES:
        if os.path.exists("/dev/" + name):
            open(dev + "/" + name, "w").close()
            mount("/dev/" + name, dev + "/" + name, None, MS_BIND)
    os.mkdir(dev + "/pts")
    # A private devpts instance: guest ptys are numbered from 0 and invisible to the host.
    mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    os.symlink("pts/ptmx", dev + "/ptmx")
    os.mkdir(dev + "/shm")
    mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m,uid=%d,gid=%d" % (uid, uid))
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, dev + "/" + name)
        os.lchown(dev + "/" + name, uid, uid)


def build(root, uid_base, workdir, workdir_uid):
    """Populate and mount everything under root (an empty directory on the host)."""
    mount(root, root, None, MS_BIND)            # pivot_root needs the new root to be a mount point
    os.chown(root, uid_base, uid_base)
    os.chmod(root, 0o755)
    for name, mode in OWN_DIRS:
        _own_dir(root + "/" + name, mode, uid_base)
    if workdir not in ("/", "/root", "/tmp"):
        _own_dir(root + workdir, 0o755, workdir_uid)
    elif workdir == "/root" and workdir_uid != uid_base:
        os.chown(root + "/root", workdir_uid, workdir_uid)
    for name in SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), root + "/" + name)
            os.lchown(root + "/" + name, uid_base, uid_base)
        elif os.path.isdir(host):
            os.makedirs(root + "/" + name, exist_ok=True)
            _bind_ro(host, root + "/" + name)
    for name, mode in (("proc", 0o555), ("sys", 0o555), ("dev", 0o755)):
        os.makedirs(root + "/" + name, mode=mode, exist_ok=True)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("sysfs", root + "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _dev(root, uid_base)


def pivot(root):
    """Make root the guest's / and drop every host mount from this namespace."""
    old = root + "/.oldroot"
    os.mkdir(old, 0o700)
    nr = _PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(0, "pivot_root: unsupported machine %s" % platform.machine())
    if _libc.syscall(nr, root.encode(), old.encode()) != 0:
        _fail("pivot_root")
    os.chdir("/")
    if _libc.umount2(b"/.oldroot", MNT_DETACH) != 0:
        _fail("umount old root")
    os.rmdir("/.oldroot")
