# Request validation helpers shared by the routes: query parsing with
# URLSearchParams semantics, ids, generations, paths, JSON bodies, modes, keys.
# Every failure raises ApiError with the code the calling route chooses.

import datetime
import json
import re

from . import config
from .errors import ApiError

_HEX = b"0123456789abcdefABCDEF"
_GEN_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_ID_RE = re.compile(r"^c([1-9][0-9]{0,2})$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_MODE_RE = re.compile(r"^0[0-7]{3}$")
_EID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _pct_decode(text):
    raw = text.replace("+", " ").encode("utf-8", "surrogatepass")
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x25 and i + 2 < len(raw) and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(c)
            i += 1
    return bytes(out)


class Query:
    """Decoded query parameters in order; values are str (U+FFFD for bad UTF-8)."""

    def __init__(self, raw):
        self.items = []      # (key, value)
        self.clean = {}      # key -> value decoded strictly (False when not UTF-8)
        for piece in raw.split("&") if raw else []:
            if not piece:
                continue
            k, _, v = piece.partition("=")
            kb, vb = _pct_decode(k), _pct_decode(v)
            key = kb.decode("utf-8", "replace")
            val = vb.decode("utf-8", "replace")
            self.items.append((key, val))
            try:
                vb.decode("utf-8")
                self.clean[key] = True
            except UnicodeDecodeError:
                self.clean[key] = False

    def keys(self):
        return [k for k, _ in self.items]

    def count(self, key):
        return sum(1 for k, _ in self.items if k == key)

    def get(self, key, default=None):
        for k, v in self.items:
            if k == key:
                return v
        return default

    def has(self, key):
        return self.count(key) > 0

    def only(self, allowed, code):
        """Reject unknown or duplicate keys with `code`."""
        for k in self.keys():
            if k not in allowed or self.count(k) != 1:
                raise ApiError(400, code)


def valid_container_id(value):
    if value == "small":
        return True
    m = _ID_RE.match(value or "")
    return bool(m) and int(m.group(1)) <= 499


def slot_index(cid):
    return 0 if cid == "small" else int(cid[1:])


def slot_name(index):
    return "small" if index == 0 else f"c{index}"


def valid_generation(value):
    if not value or len(value) > 32 or not _GEN_RE.match(value):
        return False
    try:
        datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def iso_ms(ms):
    """Canonical toISOString() form of a Unix-ms time."""
    dt = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def iso_seconds(seconds):
    """Whole-second ISO time (always .000Z), as stat %Y gives."""
    return iso_ms(int(seconds) * 1000)


def valid_path(path, allow_root=False):
    """§4.1 grammar: absolute, no NUL, <= 4096 UTF-8 bytes, clean segments."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        return False
    if len(path.encode("utf-8", "surrogatepass")) > config.MAX_PATH_BYTES:
        return False
    if path == "/":
        return allow_root
    return all(seg not in ("", ".", "..") for seg in path[1:].split("/"))


def valid_idempotency_key(value):
    return value is not None and bool(_KEY_RE.match(value))


def valid_mode(value):
    return isinstance(value, str) and bool(_MODE_RE.match(value))


def valid_execution_id(value):
    return bool(_EID_RE.match(value))


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name):
    raise ValueError("not JSON: %s" % name)      # NaN / Infinity are not JSON


def parse_json_object(data):
    """Strict UTF-8, then JSON, and it must be an object; else 400 invalid_request."""
    try:
        text = data.decode("utf-8")
        doc = json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "invalid_request")
    if not isinstance(doc, dict):
        raise ApiError(400, "invalid_request")
    return doc


def utf8_len(text):
    return len(text.encode("utf-8", "surrogatepass"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def wellformed(text):
    """Lone surrogates become U+FFFD, as a JS TextEncoder would encode them."""
    return _SURROGATE.sub("\ufffd", text)


def valid_command(value):
    return (isinstance(value, str) and value.strip() != "" and "\0" not in value
            and utf8_len(value) <= config.MAX_COMMAND_BYTES)
