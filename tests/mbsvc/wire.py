# Framing between the service and its per-generation guest agents.
# A frame is: u32 JSON length, u32 payload length, JSON header, raw payload.
# File descriptors ride as SCM_RIGHTS on the first bytes of a frame.

import array
import json
import socket
import struct

_HDR = struct.Struct("!II")
_MAX_FDS = 8


class WireClosed(Exception):
    """The peer closed the connection."""


def send(sock, header, payload=b"", fds=()):
    data = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head = _HDR.pack(len(data), len(payload)) + data
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        sent = sock.sendmsg([head], anc)
        head = head[sent:]
    if len(payload) < 65536:
        sock.sendall(head + payload)
    else:
        sock.sendall(head)
        sock.sendall(payload)


def _recv_exact(sock, n, fds):
    buf = bytearray()
    while len(buf) < n:
        want = n - len(buf)
        if fds is not None:
            data, anc, _flags, _addr = sock.recvmsg(
                want, socket.CMSG_SPACE(_MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC)
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
                    fds.extend(a)
        else:
            data = sock.recv(min(want, 1 << 20))
        if not data:
            raise WireClosed()
        buf += data
    return bytes(buf)


def recv(sock):
    """Return (header, payload, fds).  Raises WireClosed at EOF."""
    fds = []
    jlen, plen = _HDR.unpack(_recv_exact(sock, _HDR.size, fds))
    header = json.loads(_recv_exact(sock, jlen, fds)) if jlen else {}
    payload = _recv_exact(sock, plen, None) if plen else b""
    return header, payload, fds
