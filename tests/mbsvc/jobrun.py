# Runs one managed job in its guest: spawn under `timeout --signal=KILL` (pipes,
# or a pty allocated in the guest), the output pump (joboutput), the stdin
# writer, timeout / cancel / output-limit kills, idle renewal every
# job_renew_ms while running, and the final status. As in the hosted runtime the
# job ends when its process has exited and its streams reached EOF, not before.
# One thread per job plus a waiter and a stdin writer.

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
from .execrun import LENIENT_GRACE, exit_code, timeout_argv
from .generation import now_ms
from .guestops import guest_env
from .joboutput import make_output
from .validate import iso_ms

STOP_WAIT = 2.0          # seconds a killed job may take to be reaped before its record is closed anyway


def set_winsize(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _start(job, gen, argv, env):
    """Start the job's process: (pid, {read fd: stream}, stdin fd or None), or None if it did not start.
    A pty is allocated inside the guest; its master is both output and input."""
    spec = job.spec
    if job.pty is not None:
        try:
            pid, master = gen.guest.spawn_pty(argv, env, spec.get("cwd"), job.pty["cols"], job.pty["rows"])
        except GuestError:
            return None
        with job.cond:
            job.master = master
        return pid, {master: "stdout"}, master
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    stdin_fd = in_w if spec.get("stdin") else None
    if stdin_fd is None:
        os.close(in_w)
    try:
        pid = gen.guest.spawn(argv, env, [in_r, out_w, err_w], spec.get("cwd"))
    except GuestError:
        pid = None
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    if pid is None:
        for fd in (out_r, err_r) + ((stdin_fd,) if stdin_fd is not None else ()):
            os.close(fd)
        return None
    return pid, {out_r: "stdout", err_r: "stderr"}, stdin_fd


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


def _finish(job, status, spawn_failed=False, legacy=False):
    with job.cond:
        if job.reason is not None:
            job.status = job.reason
            job.timed_out = job.reason == "timed_out"
            job.output_truncated = job.reason == "output_limit"
            job.exit_code = None
        elif spawn_failed or status is None:
            job.status, job.exit_code = "failed", None
        else:
            code = exit_code(status, legacy)
            job.exit_code = code
            job.status = "succeeded" if code == 0 else "failed"
        job.stdin_closed = True
        job.finished_at = iso_ms(now_ms())
        job.cond.notify_all()


def run(job, opts):
    gen = job.gen
    spec = job.spec
    legacy = opts.legacy_exit_codes

    def hook():            # the container is stopping: the job ends as canceled before stop returns
        job_stop(job)
        with job.cond:
            job.cond.wait_for(job.terminal, 2.0)
    timeout_ms = min(spec.get("timeoutMs", config.DEFAULT_TIMEOUT_MS), max(0, gen.remaining_ms()))
    deadline = time.monotonic() + timeout_ms / 1000.0          # armed before GNU timeout starts
    if not gen.add_stop_hook(hook):
        job.reason = job.reason or "canceled"
        _finish(job, None, True)
        gen.release(renew=False)
        return
    argv = ["/bin/sh", "-lc", spec["command"]] if "command" in spec else list(spec["argv"])
    if not legacy:
        argv = timeout_argv(timeout_ms, argv)
    started = _start(job, gen, argv, guest_env(gen, spec.get("env")))
    if started is None:
        _finish(job, None, True)
        gen.remove_stop_hook(hook)
        gen.release()
        return
    pid, outs, stdin_fd = started
    with job.cond:
        job.pid = pid
        if job.reason is None:
            job.status = "running"
        stopping = job.reason is not None
        job.cond.notify_all()
    if stopping:
        gen.guest.kill(pid, 9)
    wake_r, wake_w = os.pipe()
    status = []

    def waiter():
        try:
            status.append(gen.guest.wait(pid))
        except GuestError:
            pass
        try:
            os.write(wake_w, b"x")
        except OSError:        # the pump already gave up on this process (STOP_WAIT)
            pass
        finally:
            os.close(wake_w)
    threading.Thread(target=waiter, daemon=True).start()
    writer = None
    if stdin_fd is not None:
        writer = threading.Thread(target=_stdin_writer, args=(job, stdin_fd, job.pty is not None), daemon=True)
        writer.start()
    _pump(job, gen, outs, wake_r, deadline, pid, opts)
    os.close(wake_r)
    _finish(job, status[0] if status else None, legacy=legacy)
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


def _pump(job, gen, outs, wake_r, deadline, pid, opts):
    """Collect output until the process has exited and every stream reached EOF, or
    until the job is stopped (timeout, cancel, output limit)."""
    output = make_output(job, opts.output_events)
    sel = selectors.DefaultSelector()
    for fd in list(outs) + [wake_r]:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    renew_every = gen.job_renew_ms / 1000.0
    renewed = time.monotonic()
    exited_at = stopped_at = None
    open_streams = len(outs)
    while True:
        now = time.monotonic()
        if job.reason is None and now >= deadline:
            job_stop(job, "timed_out")
        if job.reason is not None and stopped_at is None:
            stopped_at = now
            gen.guest.kill(pid, 9)
        if now - renewed >= renew_every:
            renewed = now
            if not gen.touch():
                job_stop(job, "canceled")
        if exited_at is not None:
            if open_streams == 0 or job.reason is not None:
                break
            if opts.lenient_exec and now - exited_at > LENIENT_GRACE:
                break
        elif stopped_at is not None and now - stopped_at > STOP_WAIT:
            break                      # killed but not reaped: do not hang the record on it
        output.tick()
        wait = min(0.25, renewed + renew_every - now, max(0.0, deadline - now) if job.reason is None else 0.25)
        for key, _ in sel.select(max(0.0, wait)):
            if key.fd == wake_r:
                sel.unregister(wake_r)
                exited_at = time.monotonic()
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:        # EIO: the pty slave is closed everywhere
                data = b""
            if not data:
                sel.unregister(key.fd)
                open_streams -= 1
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
