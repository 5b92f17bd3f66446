# PID 1 of an isolated guest, started by the service through
# `unshare --mount --pid --fork ...` as real root: builds the root filesystem
# (guestroot), forks the agent into a user namespace in which guest root is an
# unprivileged host uid range, then blocks on the lifeline pipe. Like the hosted
# image's `sleep infinity` it never waits for a child, so every orphan that exits
# stays a zombie; when the service closes the lifeline (or dies) it exits and the
# kernel kills the whole PID namespace. Run as: python3 -m mbsvc.guestinit ...

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import struct
import sys

from . import agent, config, guestroot, wire

CLONE_NEWUSER = 0x10000000


def _loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sh14x", b"lo", 0))      # SIOCGIFFLAGS
        flags = struct.unpack("16sh14x", ifr)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh14x", b"lo", flags | 1))     # SIOCSIFFLAGS, IFF_UP
    finally:
        s.close()


def _enter_userns(ask_w, go_r, guest_uid):
    """In the agent child: new user namespace, wait for PID 1 to write the maps, become the guest user."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "unshare user namespace: %s" % os.strerror(err))
    os.write(ask_w, b"m")
    if os.read(go_r, 1) != b"g":
        raise OSError(0, "uid map was not written")
    os.setgroups([])
    # Become guest root first: only a change away from uid 0 *of this namespace*
    # drops the capabilities that unshare granted (host root is not mapped here).
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    if guest_uid:
        os.setresgid(guest_uid, guest_uid, guest_uid)
        os.setresuid(guest_uid, guest_uid, guest_uid)


def _write_maps(pid, base):
    # PID 1 is root of the parent (initial) user namespace, so it may map any range.
    for name in ("uid_map", "gid_map"):
        with open("/proc/%d/%s" % (pid, name), "w") as f:
            f.write("0 %d %d\n" % (base, config.UID_RANGE))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ctrl", type=int, required=True)
    p.add_argument("--life", type=int, required=True)
    p.add_argument("--rootfs", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--uid-base", type=int, required=True)
    p.add_argument("--guest-uid", type=int, default=0)
    p.add_argument("--no-internet", action="store_true")
    p.add_argument("--reaping-init", action="store_true")
    args = p.parse_args()
    ctrl = socket.socket(fileno=args.ctrl)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        host_pid = int(os.readlink("/proc/self"))       # still the host's /proc here
        guestroot.detach_fuse_mounts()
        guestroot.build(args.rootfs, args.uid_base, args.workdir, args.uid_base + args.guest_uid)
        guestroot.pivot(args.rootfs)
        if args.no_internet:
            _loopback_up()
    except OSError as e:
        wire.send(ctrl, {"ok": False, "error": str(e)})
        sys.exit(1)
    ask_r, ask_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(args.life)
        os.close(ask_r)
        os.close(go_w)
        try:
            _enter_userns(ask_w, go_r, args.guest_uid)
            os.chdir(args.workdir)
        except OSError as e:
            wire.send(ctrl, {"ok": False, "error": str(e)})
            os._exit(1)
        os.close(ask_w)
        os.close(go_r)
        agent.serve_isolated(ctrl, host_pid, args.workdir)       # never returns
    ctrl.close()
    os.close(ask_w)
    os.close(go_r)
    try:
        if os.read(ask_r, 1) == b"m":
            _write_maps(pid, args.uid_base)
            os.write(go_w, b"g")
    except OSError as e:
        print("guestinit: %s" % e, file=sys.stderr)
    os.close(ask_r)
    os.close(go_w)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if args.reaping_init:
        # Set only now: the agent must not inherit it, or its own children would vanish unwaited.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while os.read(args.life, 1):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
