# Runs one managed job in its guest: spawn (pipes or a PTY), the output pump
# (joboutput), the stdin writer, timeout / cancel / output-limit kills, idle
# renewal while running, and the final status.  One thread per job plus a
# waiter and a stdin writer.

import fcntl
import os
import select
import selectors
import struct
import termios
import threading
import time

from . import config
from .errors import GuestError
from .execrun import exit_code
from .guestops import guest_env
from .joboutput import Output
from .validate import iso_ms
from .generation import now_ms

EXIT_GRACE = 0.05


def set_winsize(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _open_fds(job):
    """Returns (child fds [in, out, err], {read fd: stream}, stdin fd or None, fds to close after spawn)."""
    spec = job.spec
    if job.pty is not None:
        master, slave = os.openpty()
        set_winsize(master, job.pty["cols"], job.pty["rows"])
        job.master = master
        return [slave, slave, slave], {master: "stdout"}, master, [slave]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    stdin_fd = None
    if spec.get("stdin"):
        stdin_fd = in_w
    else:
        os.close(in_w)
    return [in_r, out_w, err_w], {out_r: "stdout", err_r: "stderr"}, stdin_fd, [in_r, out_w, err_w]


def _stdin_writer(job, fd, is_pty):
    """Write queued stdin chunks in order; None in the queue means close."""
    os.set_blocking(fd, False)
    broken = False
    while True:
        with job.cond:
            job.cond.wait_for(lambda: job.stdin_queue or job.terminal(), 0.5)
            if not job.stdin_queue:
                if job.terminal():
                    break
                continue
            item = job.stdin_queue.popleft()
        if item is None:
            if is_pty:
                _write_all(job, fd, b"\x04")
            else:
                os.close(fd)
                fd = None
            break
        ok = not broken and _write_all(job, fd, item["data"])
        broken = broken or not ok
        with job.cond:
            job.stdin_pending -= len(item["data"])
        item["ok"] = ok
        item["done"].set()
    with job.cond:
        rest, job.stdin_queue = list(job.stdin_queue), type(job.stdin_queue)()
    for item in rest:
        if item is not None:
            item["done"].set()
    if fd is not None and not is_pty:
        os.close(fd)


def _write_all(job, fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            if job.terminal():
                return False
            select.select([], [fd], [], 0.1)
        except OSError:
            return False
    return True


def _finish(job, status, spawn_failed=False):
    with job.cond:
        if job.reason is not None:
            job.status = job.reason
            job.timed_out = job.reason == "timed_out"
            job.output_truncated = job.reason == "output_limit"
            job.exit_code = None
        elif spawn_failed or status is None:
            job.status, job.exit_code = "failed", None
        else:
            code = exit_code(status)
            job.exit_code = code
            job.status = "succeeded" if code == 0 else "failed"
        job.stdin_closed = True
        job.finished_at = iso_ms(now_ms())
        job.cond.notify_all()


def run(job):
    gen = job.gen
    spec = job.spec
    def hook():            # the container is stopping: the job ends as canceled before stop returns
        job_stop(job)
        with job.cond:
            job.cond.wait_for(job.terminal, 2.0)
    timeout_ms = min(spec.get("timeoutMs", config.DEFAULT_TIMEOUT_MS), max(0, gen.remaining_ms()))
    deadline = time.monotonic() + timeout_ms / 1000.0
    if not gen.add_stop_hook(hook):
        job.reason = job.reason or "canceled"
        _finish(job, None, True)
        gen.release(renew=False)
        return
    child, outs, stdin_fd, close_after = _open_fds(job)
    argv = ["/bin/sh", "-lc", spec["command"]] if "command" in spec else list(spec["argv"])
    try:
        pid = gen.guest.spawn(argv, guest_env(spec.get("env")), child, spec.get("cwd"), job.pty is not None)
    except GuestError:
        pid = None
    finally:
        for fd in close_after:
            os.close(fd)
    if pid is None:
        for fd in list(outs) + ([stdin_fd] if stdin_fd is not None and stdin_fd not in outs else []):
            os.close(fd)
        _finish(job, None, True)
        gen.remove_stop_hook(hook)
        gen.release()
        return
    with job.cond:
        job.pid = pid
        if job.reason is None:
            job.status = "running"
        stopping = job.reason is not None
        job.cond.notify_all()
    if stopping:
        gen.guest.kill(pid, 9)
    done = threading.Event()
    status = []

    def waiter():
        try:
            status.append(gen.guest.wait(pid))
        except GuestError:
            pass
        done.set()
        with job.cond:
            job.cond.notify_all()
    threading.Thread(target=waiter, daemon=True).start()
    writer = None
    if stdin_fd is not None:
        writer = threading.Thread(target=_stdin_writer, args=(job, stdin_fd, job.pty is not None), daemon=True)
        writer.start()
    _pump(job, gen, outs, done, deadline, pid)
    _finish(job, status[0] if status else None)
    for fd in outs:
        if fd != stdin_fd:
            os.close(fd)
    if writer is not None:
        writer.join(2)
    with job.cond:
        master, job.master = job.master, None
    if master is not None:
        try:
            os.close(master)
        except OSError:
            pass
    gen.remove_stop_hook(hook)
    gen.release()


def _pump(job, gen, outs, done, deadline, pid):
    output = Output(job)
    sel = selectors.DefaultSelector()
    for fd in outs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    renew_every = min(config.JOB_RENEW_MS, gen.idle_timeout_ms / 3.0) / 1000.0
    renewed = time.monotonic()
    exited_at = None
    killed = False
    while True:
        now = time.monotonic()
        if job.reason is None and now >= deadline:
            job_stop(job, "timed_out")
        if job.reason is not None and not killed:
            killed = True
            gen.guest.kill(pid, 9)
        if now - renewed >= renew_every:
            gen.touch()
            renewed = now
        if done.is_set():
            if exited_at is None:
                exited_at = now
            if not sel.get_map() or now - exited_at > EXIT_GRACE or job.reason is not None:
                break
        output.tick()
        for key, _ in sel.select(0.05 if exited_at is None else 0.01):
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:        # EIO: the PTY slave is closed everywhere
                data = b""
            if not data:
                sel.unregister(key.fd)
                continue
            if job.reason is not None:
                continue
            if output.feed(outs[key.fd], data):
                job_stop(job, "output_limit")
    sel.close()
    output.close()


def job_stop(job, reason="canceled"):
    """Mark the job for stopping; the pump kills the process group."""
    with job.cond:
        if job.terminal() or job.reason is not None:
            return
        job.reason = reason
        pid = job.pid
        job.cond.notify_all()
    if pid is not None and reason == "canceled":
        job.gen.guest.kill(pid, 9)
