# Foreground exec (§3, §9.3): `timeout --signal=KILL <s>s /bin/sh -lc CMD` in the
# guest with stdin at EOF. The answer waits for the exit AND end-of-file on both
# pipes, so a background child holding one keeps the request open until timeoutMs.
# Timeout, the 1 MiB output cap and a client disconnect kill the process group of
# `timeout` (one group: processes that left it live on) and answer at once.

import os
import selectors
import socket
import threading
import time

from . import config
from .errors import ApiError, GuestError
from .guestops import guest_env

LENIENT_GRACE = 0.05   # --lenient-exec: after the exit, wait this long for stragglers, then leave them


def exit_code(status, legacy=False):
    """Raw wait status -> exit code. A signal death has none (null): GNU timeout, a
    process-group leader, re-raises its child's signal on itself. legacy: 128+N."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status) and legacy:
        return 128 + os.WTERMSIG(status)
    return None


def timeout_argv(timeout_ms, argv):
    secs = ("%.3f" % (max(1, timeout_ms) / 1000.0)).rstrip("0").rstrip(".")
    return ["timeout", "--signal=KILL", secs + "s"] + list(argv)


def _client_gone(sock):
    """True when the client closed (or reset) its side; False for pipelined data or nothing."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _waiter(gen, pid, status, wake_w):
    try:
        status.append(gen.guest.wait(pid))
    except GuestError:
        pass
    try:
        os.write(wake_w, b"x")
    except OSError:            # the request already answered (timeout, disconnect)
        pass
    finally:
        os.close(wake_w)


def run(gen, command, timeout_ms, client=None, opts=None):
    """Returns the 200 body of POST /containers/exec.  Raises GuestError if the guest
    fails, ApiError(503) when the client went away."""
    lenient = bool(opts and opts.lenient_exec)
    legacy = bool(opts and opts.legacy_exit_codes)
    timeout_ms = max(1, min(timeout_ms, gen.remaining_ms()))
    deadline = time.monotonic() + timeout_ms / 1000.0          # armed before GNU timeout starts
    in_r, in_w = os.pipe()
    os.close(in_w)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = gen.guest.spawn(timeout_argv(timeout_ms, ["/bin/sh", "-lc", command]), guest_env(gen),
                              [in_r, out_w, err_w])
    except GuestError:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    wake_r, wake_w = os.pipe()
    status = []
    threading.Thread(target=_waiter, args=(gen, pid, status, wake_w), daemon=True).start()
    bufs = {out_r: bytearray(), err_r: bytearray()}
    total, reason, exited_at = 0, None, None
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r, wake_r):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    if client is not None and not lenient:
        sel.register(client, selectors.EVENT_READ)
    open_pipes = 2
    try:
        while reason is None:
            now = time.monotonic()
            if now >= deadline:
                reason = "timed_out"
                break
            if exited_at is not None and (open_pipes == 0 or (lenient and now - exited_at > LENIENT_GRACE)):
                break
            wait = deadline - now if exited_at is None or not lenient else min(deadline - now, LENIENT_GRACE)
            for key, _ in sel.select(wait):
                if key.fileobj is client:
                    if _client_gone(client):
                        reason = "disconnected"
                    else:
                        sel.unregister(client)        # pipelined bytes: a disconnect can no longer be seen
                    continue
                if key.fd == wake_r:
                    sel.unregister(wake_r)
                    exited_at = time.monotonic()
                    continue
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fd)
                    open_pipes -= 1
                    continue
                if reason is not None:
                    continue
                room = config.MAX_OUTPUT_BYTES - total
                if len(data) > room:
                    data = data[:room]
                    reason = "output_limit"
                bufs[key.fd] += data
                total += len(data)
    finally:
        sel.close()
        for fd in (out_r, err_r, wake_r):
            os.close(fd)
    if reason is not None:
        gen.guest.kill(pid, 9)                                 # kill -9 -- -PGID of `timeout`
    if reason == "disconnected":
        raise ApiError(503, "execution_unavailable")
    code = None
    if reason is None:
        if not status:
            raise GuestError("process lost")
        code = exit_code(status[0], legacy)
    return {"stdout": bufs[out_r].decode("utf-8", "replace"), "stderr": bufs[err_r].decode("utf-8", "replace"),
            "exitCode": code, "timedOut": reason == "timed_out", "outputTruncated": reason == "output_limit"}
