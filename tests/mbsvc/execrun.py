# Foreground exec (§3): `timeout --signal=KILL <s>s /bin/sh -lc CMD` in the
# guest with stdin at EOF, both streams collected up to 1 MiB combined,
# a server-side timer armed before GNU timeout, UTF-8 decoding per stream.

import os
import selectors
import threading
import time

from . import config
from .errors import GuestError
from .guestops import guest_env

EXIT_GRACE = 0.05   # after the shell exits, wait this long for stragglers holding the pipes


def exit_code(status):
    """Raw wait status -> exit code (128+N for a signal death)."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return None


def run(gen, command, timeout_ms):
    """Returns the 200 body of POST /containers/exec.  Raises GuestError if the guest fails."""
    timeout_ms = max(1, min(timeout_ms, gen.remaining_ms()))
    deadline = time.monotonic() + timeout_ms / 1000.0          # armed before GNU timeout starts
    secs = ("%.3f" % (timeout_ms / 1000.0)).rstrip("0").rstrip(".")
    in_r, in_w = os.pipe()
    os.close(in_w)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = gen.guest.spawn(["timeout", "--signal=KILL", secs + "s", "/bin/sh", "-lc", command],
                              guest_env(), [in_r, out_w, err_w])
    except GuestError:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    done = threading.Event()
    status = []

    def waiter():
        try:
            status.append(gen.guest.wait(pid))
        except GuestError:
            pass
        done.set()
    threading.Thread(target=waiter, daemon=True).start()

    bufs = {out_r: bytearray(), err_r: bytearray()}
    total, timed_out, truncated = 0, False, False
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if not timed_out and not truncated and now >= deadline:
                timed_out = True
                gen.guest.kill(pid, 9)
            if done.is_set() and exited_at is None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE:
                break
            if (timed_out or truncated) and done.is_set():
                break
            wait = min(0.05, max(0.0, deadline - now)) if not done.is_set() else 0.01
            for key, _ in sel.select(wait):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fd)
                    continue
                if truncated or timed_out:
                    continue
                room = config.MAX_OUTPUT_BYTES - total
                if len(data) > room:
                    data = data[:room]
                    truncated = True
                    gen.guest.kill(pid, 9)
                bufs[key.fd] += data
                total += len(data)
        while not done.wait(0.05):
            if not timed_out and not truncated and time.monotonic() >= deadline:
                timed_out = True
                gen.guest.kill(pid, 9)
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    code = None
    if not timed_out and not truncated and status:
        code = exit_code(status[0])
    if not status and not timed_out and not truncated:
        raise GuestError("process lost")
    return {"stdout": bufs[out_r].decode("utf-8", "replace"), "stderr": bufs[err_r].decode("utf-8", "replace"),
            "exitCode": code, "timedOut": timed_out, "outputTruncated": truncated}
