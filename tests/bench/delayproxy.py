#!/usr/bin/python3
"""A small delaying TCP proxy for the benchmark (standard library only).

Listens on a loopback port and forwards every connection to one loopback
target, bytes both ways. Each chunk read from the client is held for
--delay-ms before it is sent on to the target, so a request/response round
trip costs about that much more, like one HTTP request to the local service
run with --latency-ms. Pipelined traffic is not throttled: chunks queue with
their own deadlines, so only the first byte of a burst waits.

What it is not: a bandwidth shaper, a general proxy, or anything that talks
to an address outside 127.0.0.0/8 (both ends are checked).

Bounded: at most --max-conns connections at once (more are closed at
accept), at most --max-queue bytes held per connection (the reader waits
when it is full), and it stops by itself after --max-seconds, when its
parent process goes away, or on SIGTERM/SIGINT.

Usage: delayproxy.py --target 127.0.0.1:22 --delay-ms 20 [--listen 127.0.0.1:0]
It prints "listening 127.0.0.1:PORT" on stdout once it accepts connections.
"""
import argparse
import collections
import ipaddress
import os
import signal
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


def parse_addr(text):
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
        raise SystemExit("delayproxy: %s is not a loopback address" % host)
    return host, int(port)


class DelayedPipe:
    """Moves bytes src -> dst; each chunk is sent delay seconds after it was read."""

    def __init__(self, src, dst, delay, max_queue, on_done):
        self.src, self.dst, self.delay = src, dst, delay
        self.max_queue = max_queue
        self.on_done = on_done
        self.queue = collections.deque()
        self.queued = 0
        self.eof = False
        self.dead = False
        self.cond = threading.Condition()

    def start(self):
        if self.delay > 0:
            threading.Thread(target=self.read_loop, daemon=True).start()
            threading.Thread(target=self.write_loop, daemon=True).start()
        else:
            threading.Thread(target=self.copy_loop, daemon=True).start()

    def copy_loop(self):
        try:
            while True:
                data = self.src.recv(CHUNK)
                if not data:
                    break
                self.dst.sendall(data)
            shutdown(self.dst, socket.SHUT_WR)
        except OSError:
            pass
        self.on_done()

    def read_loop(self):
        try:
            while True:
                with self.cond:
                    while self.queued >= self.max_queue and not self.dead:
                        self.cond.wait(0.5)
                    if self.dead:
                        return
                data = self.src.recv(CHUNK)
                with self.cond:
                    if not data:
                        self.eof = True
                        self.cond.notify_all()
                        return
                    self.queue.append((time.monotonic() + self.delay, data))
                    self.queued += len(data)
                    self.cond.notify_all()
        except OSError:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def write_loop(self):
        try:
            while True:
                with self.cond:
                    while not self.queue and not self.eof and not self.dead:
                        self.cond.wait(0.5)
                    if self.dead or (not self.queue and self.eof):
                        break
                    due, data = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                # Coalesce what is already due into one send.
                parts, size = [], 0
                now = time.monotonic()
                with self.cond:
                    while self.queue and self.queue[0][0] <= now and size < CHUNK * 4:
                        parts.append(self.queue.popleft()[1])
                        size += len(parts[-1])
                    self.queued -= size
                    self.cond.notify_all()
                self.dst.sendall(b"".join(parts))
            if not self.dead:
                shutdown(self.dst, socket.SHUT_WR)
        except OSError:
            pass
        self.stop()
        self.on_done()

    def stop(self):
        with self.cond:
            self.dead = True
            self.cond.notify_all()


def shutdown(sock, how):
    try:
        sock.shutdown(how)
    except OSError:
        pass


class Connection:
    def __init__(self, proxy, client, target, delay, max_queue):
        self.proxy = proxy
        self.client = client
        self.upstream = socket.create_connection(target, timeout=10)
        self.upstream.settimeout(None)
        for s in (self.client, self.upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()
        self.open_pipes = 2
        self.pipes = [
            DelayedPipe(client, self.upstream, delay, max_queue, self.pipe_done),
            DelayedPipe(self.upstream, client, 0, max_queue, self.pipe_done),
        ]

    def start(self):
        for p in self.pipes:
            p.start()

    def pipe_done(self):
        with self.lock:
            self.open_pipes -= 1
            last = self.open_pipes == 0
        if last:
            self.close()

    def close(self):
        for p in self.pipes:
            p.stop()
        for s in (self.client, self.upstream):
            shutdown(s, socket.SHUT_RDWR)
            s.close()
        self.proxy.forget(self)


class Proxy:
    def __init__(self, listen, target, delay_ms, max_conns, max_queue):
        self.target = target
        self.delay = delay_ms / 1000.0
        self.max_conns = max_conns
        self.max_queue = max_queue
        self.conns = set()
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(listen)
        self.sock.listen(64)
        self.sock.settimeout(0.5)

    @property
    def address(self):
        return self.sock.getsockname()

    def forget(self, conn):
        with self.lock:
            self.conns.discard(conn)

    def serve(self, deadline, parent):
        while time.monotonic() < deadline and not STOP.is_set():
            if parent and os.getppid() != parent:
                break
            try:
                client, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            client.settimeout(None)
            with self.lock:
                full = len(self.conns) >= self.max_conns
            if full:
                client.close()
                continue
            try:
                conn = Connection(self, client, self.target, self.delay, self.max_queue)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.add(conn)
            conn.start()
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            c.close()


STOP = threading.Event()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--target", required=True)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--max-conns", type=int, default=32)
    ap.add_argument("--max-queue", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--max-seconds", type=float, default=3600.0)
    args = ap.parse_args(argv)
    listen, target = parse_addr(args.listen), parse_addr(args.target)
    proxy = Proxy(listen, target, args.delay_ms, args.max_conns, args.max_queue)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: STOP.set())
    host, port = proxy.address
    print("listening %s:%d" % (host, port), flush=True)
    proxy.serve(time.monotonic() + args.max_seconds, os.getppid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
