# File and directory operations, run *inside* the guest agent (guest mount
# namespace, guest uid), so symlinks resolve in the guest's view and
# permission errors are real.  Plain os calls: no process is forked.
# Each op returns (result, payload) or raises FsError(code).

import ctypes
import errno
import json
import os
import secrets
import shutil
import stat
import string
import time

MAX_FILE = 1048576
MAX_METADATA = 1048576
MAX_OFFSET = 1000000
_TMP_ALPHABET = string.ascii_letters + string.digits
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)

_TYPES = [(stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symlink"),
          (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character"),
          (stat.S_ISBLK, "block")]
_MISSING = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


class FsError(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _b(path):
    return os.fsencode(path)


def _lookup_error(err):
    if err.errno in _MISSING:
        return FsError("file_not_found")
    return FsError("file_access_denied")


def _parent(path):
    head = path[:path.rfind("/")]
    return head or "/"


def _iso(seconds):
    t = time.gmtime(int(seconds))
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", t)


def _utf8(raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FsError("unsupported_file_name")


def _entry(name, path, st, link_raw=None):
    kind = next((k for test, k in _TYPES if test(st.st_mode)), "other")
    doc = {"name": name, "path": path, "type": kind, "size": st.st_size,
           "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid, "gid": st.st_gid,
           "modifiedAt": _iso(st.st_mtime)}
    if kind == "symlink":
        doc["linkTarget"] = _utf8(link_raw)
    return doc


def read(req):
    path = _b(req["path"])
    try:
        st = os.stat(path)
    except OSError as e:
        raise _lookup_error(e)
    if not stat.S_ISREG(st.st_mode):
        raise FsError("not_regular_file")
    if st.st_size > MAX_FILE:
        raise FsError("file_too_large")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise _lookup_error(e) if e.errno in _MISSING else FsError("file_access_denied")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FsError("not_regular_file")
        chunks, total = [], 0
        while total <= MAX_FILE:
            data = os.read(fd, MAX_FILE + 1 - total)
            if not data:
                break
            chunks.append(data)
            total += len(data)
    except OSError:
        raise FsError("file_access_denied")
    finally:
        os.close(fd)
    if total > MAX_FILE:
        raise FsError("file_too_large")
    return {}, b"".join(chunks)


def write(req, payload):
    path = req["path"]
    bpath = _b(path)
    try:
        old = os.lstat(bpath)
    except OSError as e:
        if e.errno == errno.EACCES:
            raise FsError("file_access_denied")
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise FsError("not_regular_file")
    parent = _b(_parent(path))
    try:
        if not stat.S_ISDIR(os.stat(parent).st_mode):
            raise FsError("file_not_found")
    except OSError as e:
        raise _lookup_error(e)
    tmp = parent.rstrip(b"/") + b"/.mainbrella-file." + "".join(
        secrets.choice(_TMP_ALPHABET) for _ in range(10)).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        raise FsError("file_access_denied")
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            if old is not None:
                os.fchmod(fd, old.st_mode & 0o7777)
        finally:
            os.close(fd)
        os.rename(tmp, bpath)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise FsError("file_access_denied")
    return {"size": len(payload)}, b""


def listdir(req):
    """One page, plus a stat of the entry after it as the runtime's `sed` window has.
    An entry that vanishes between readdir and its stat fails the whole page with
    403, as the runtime's `entry ... || exit 46` does (req["lenient"]: skip it)."""
    path, limit, offset = req["path"], req["limit"], req["offset"]
    bpath = _b(path)
    try:
        st = os.stat(bpath)
    except OSError as e:
        raise _lookup_error(e)
    if not stat.S_ISDIR(st.st_mode):
        raise FsError("not_directory")
    try:
        names = sorted(os.listdir(bpath))
    except OSError as e:
        raise _lookup_error(e)
    window = names[offset:offset + limit + (0 if req.get("lenient") else 1)]
    more = len(names) > offset + limit
    if more and offset + limit > MAX_OFFSET:
        raise FsError("directory_too_large")
    base = "" if path == "/" else path
    entries, size = [], 0
    for raw in window:
        name = _utf8(raw)
        child = bpath.rstrip(b"/") + b"/" + raw
        try:
            cst = os.lstat(child)
            link = os.readlink(child) if stat.S_ISLNK(cst.st_mode) else None
        except FileNotFoundError:
            if req.get("lenient"):
                continue
            raise FsError("file_access_denied")
        except OSError:
            raise FsError("file_access_denied")
        entry = _entry(name, base + "/" + name, cst, link)
        if len(entries) < limit:
            size += len(json.dumps(entry)) + 1
            if size > MAX_METADATA:
                raise FsError("directory_too_large")
            entries.append(entry)
    return {"path": path, "entries": entries, "nextOffset": offset + limit if more else None}, b""


def statpath(req):
    path, follow = req["path"], req["followSymlinks"]
    bpath = _b(path)
    try:
        st = os.stat(bpath) if follow else os.lstat(bpath)
        link = os.readlink(bpath) if stat.S_ISLNK(st.st_mode) else None
    except OSError as e:
        raise _lookup_error(e)
    name = "/" if path == "/" else path.rsplit("/", 1)[1]
    return _entry(name, path, st, link), b""


def mkdir(req):
    path, recursive, mode = req["path"], req["recursive"], int(req["mode"], 8)
    bpath = _b(path)
    try:
        st = os.lstat(bpath)
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise FsError("file_access_denied" if recursive else "file_not_found")
        if e.errno != errno.ENOENT:
            raise FsError("file_access_denied")
        st = None
    if st is not None:
        if recursive and stat.S_ISDIR(st.st_mode):
            return {"path": path, "ok": True}, b""
        raise FsError("file_exists")
    parent = _b(_parent(path))
    if recursive:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError:
            raise FsError("file_access_denied")
    else:
        try:
            if not stat.S_ISDIR(os.stat(parent).st_mode):
                raise FsError("file_not_found")
        except OSError as e:
            raise _lookup_error(e)
    try:
        os.mkdir(bpath, mode)
        os.chmod(bpath, mode)
    except FileExistsError:
        raise FsError("file_exists")
    except OSError as e:
        if e.errno in _MISSING and not recursive:
            raise FsError("file_not_found")
        raise FsError("file_access_denied")
    return {"path": path, "ok": True}, b""


def _rmtree_error(*_args):
    raise FsError("file_access_denied")


def remove(req):
    path, recursive = req["path"], req["recursive"]
    bpath = _b(path)
    try:
        st = os.lstat(bpath)
    except OSError as e:
        raise _lookup_error(e)
    try:
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(bpath)
        elif recursive:
            shutil.rmtree(bpath, onerror=_rmtree_error)
        else:
            try:
                os.rmdir(bpath)
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST) and \
                        os.access(_b(_parent(path)), os.W_OK | os.X_OK):
                    raise FsError("directory_not_empty")
                raise FsError("file_access_denied")
    except OSError:
        raise FsError("file_access_denied")
    return {"path": path, "ok": True}, b""


def _copy_across(src, dst):
    st = os.lstat(src)
    if stat.S_ISDIR(st.st_mode):
        shutil.copytree(src, dst, symlinks=True)
        shutil.rmtree(src)
    else:
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
        os.unlink(src)


def move(req):
    path, dest = req["path"], req["destination"]
    bsrc, bdst = _b(path), _b(dest)
    try:
        os.lstat(bsrc)
    except OSError as e:
        raise _lookup_error(e)
    try:
        os.lstat(bdst)
        raise FsError("file_exists")
    except OSError as e:
        if e.errno not in _MISSING:
            raise FsError("file_access_denied")
    try:
        if not stat.S_ISDIR(os.stat(_b(_parent(dest))).st_mode):
            raise FsError("file_not_found")
    except OSError as e:
        raise _lookup_error(e)
    rc = _libc.renameat2(_AT_FDCWD, bsrc, _AT_FDCWD, bdst, _RENAME_NOREPLACE)
    if rc != 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FsError("file_exists")
        if err in (errno.EINVAL, errno.ENOSYS) and not os.path.lexists(bdst):
            try:                     # filesystem without RENAME_NOREPLACE: checked above, rename now
                os.rename(bsrc, bdst)
                err = 0
            except OSError as e:
                err = e.errno
        if err == errno.EXDEV:
            try:
                _copy_across(bsrc, bdst)
            except (OSError, shutil.Error):
                raise FsError("file_access_denied")
        elif err != 0:
            raise FsError("file_not_found" if err == errno.ENOENT else "file_access_denied")
    if os.path.lexists(bsrc):
        raise FsError("file_exists")
    return {"path": path, "destination": dest, "ok": True}, b""


def chmod(req):
    path, mode = req["path"], req["mode"]
    bpath = _b(path)
    try:
        st = os.lstat(bpath)
    except OSError as e:
        raise _lookup_error(e)
    if stat.S_ISLNK(st.st_mode):
        raise FsError("symlink_not_allowed")
    try:
        os.chmod(bpath, int(mode, 8))
    except OSError:
        raise FsError("file_access_denied")
    return {"path": path, "mode": mode, "ok": True}, b""


OPS = {"read": read, "list": listdir, "stat": statpath, "mkdir": mkdir,
       "remove": remove, "move": move, "chmod": chmod}
