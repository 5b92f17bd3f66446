"""mbfs: names the mount keeps for itself and names a bad server sends.

mbfs's own names (.mbfs-* staging, .fuse_hidden* for files unlinked while
open, .mainbrella at the root) are never made through the mount (EPERM,
nothing reaches the sandbox), never listed and never found (ENOENT), with
one warning per name in the log. Names no directory can hold in a listing
(a NUL, a '/', '.', '..', '', a repeated name) are dropped, one log line
each, and the good entries still show."""
import errno
import os
import re
import stat
import time

import pytest

import mbtest
from test_mbfs_helpers import invalidate, read_file, sh, sync, unique, write_file

RESERVED = [".mbfs-up-x", ".mbfs-up", ".mbfs-dl-1", ".mbfs-sh-1", ".fuse_hidden123"]


def guest_names(service, container, d):
    out = sh(service, container, "ls -A '/workspace/%s'" % d)
    return sorted(out.split())


def wait_log(m, pattern, timeout=30):
    """The daemon's log once pattern (a regex) is in it; fails if it is not
    within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        log = m.log()
        if re.search(pattern, log):
            return log
        assert time.monotonic() < deadline, (pattern, log[-3000:])
        time.sleep(0.05)


def make(op, path, src):
    if op == "create":
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
    elif op == "mknod":
        os.mknod(path, 0o644 | stat.S_IFREG)
    elif op == "mkdir":
        os.mkdir(path)
    elif op == "symlink":
        os.symlink("src", path)
    elif op == "link":
        os.link(src, path)
    elif op == "rename":
        os.rename(src, path)


@pytest.mark.parametrize("op", ["create", "mknod", "mkdir", "symlink", "link", "rename"])
def test_a_reserved_name_cannot_be_made(service, container, mount, op):
    d = unique("rsv")
    os.mkdir(mount.path(d))
    src = mount.path(d, "src")
    write_file(src, b"data\n")
    sync(mount)
    for name in RESERVED:
        with pytest.raises(OSError) as e:
            make(op, mount.path(d, name), src)
        assert e.value.errno == errno.EPERM, (op, name)
        with pytest.raises(FileNotFoundError):
            os.lstat(mount.path(d, name))
    assert sorted(os.listdir(mount.path(d))) == ["src"]
    assert read_file(src) == b"data\n"
    sync(mount)
    assert guest_names(service, container, d) == ["src"]
    log = mount.log()
    for name in RESERVED:
        assert "cannot make '/%s/%s': names beginning '.mbfs-' or '.fuse_hidden' are reserved" \
            % (d, name) in log, log


def test_the_control_file_name_is_taken_only_at_the_root(service, container, mount):
    with pytest.raises(FileExistsError):
        os.mkdir(mount.path(".mainbrella"))
    with pytest.raises(OSError) as e:
        os.symlink("x", mount.path(".mainbrella"))
    assert e.value.errno == errno.EEXIST
    d = unique("ctl")
    os.mkdir(mount.path(d))
    write_file(mount.path(d, ".mainbrella"), b"mine\n")   # an ordinary name below
    sync(mount)
    assert sh(service, container, "cat '/workspace/%s/.mainbrella'" % d) == "mine\n"
    invalidate(mount)
    assert os.listdir(mount.path(d)) == [".mainbrella"]


def test_a_rename_to_libfuses_hidden_name_is_refused_and_loses_nothing(service, container, mount):
    """The mount renames a file unlinked while open to ".fuse_hidden" and
    16 hex digits, a name it keeps to itself. A program's own rename to
    such a name would hide the file on both sides: it fails with EPERM,
    and the file stays where it was, also while it is held open (it was
    then taken for the mount's own hiding, and removed at its close)."""
    d = unique("tohidden")
    sh(service, container, "mkdir -p /workspace/%s/dir && echo precious > /workspace/%s/a" % (d, d))
    invalidate(mount)
    held = open(mount.path(d, "a"), "rb")
    try:
        for name in ("a", "dir"):
            with pytest.raises(OSError) as e:
                os.rename(mount.path(d, name), mount.path(d, ".fuse_hidden0000000a00000001"))
            assert e.value.errno == errno.EPERM
    finally:
        held.close()
    assert sorted(os.listdir(mount.path(d))) == ["a", "dir"]
    sync(mount)
    assert sh(service, container, "cat /workspace/%s/a; ls -A /workspace/%s" % (d, d)) == \
        "precious\na\ndir\n"


def test_reserved_names_on_the_sandbox_are_not_shown(service, container, mount):
    d = unique("hid")
    names = [".fuse_hidden123", ".fuse_hidden0123456789abcdef", ".mbfs-up-x", ".mbfs-dl-x"]
    sh(service, container, "mkdir -p '/workspace/%s/sub' && cd '/workspace/%s' && touch keep %s "
       "sub/.fuse_hidden9 sub/kept && mkdir .mbfs-sh-x"
       % (d, d, " ".join("'%s'" % n for n in names)))
    try:
        sh(service, container, "echo planted > /workspace/.mainbrella")
        for _ in range(2):   # the second listing is not warned of again
            assert sorted(os.listdir(mount.path(d))) == ["keep", "sub"]
            for name in names + [".mbfs-sh-x"]:
                with pytest.raises(FileNotFoundError):
                    os.lstat(mount.path(d, name))
            assert ".mainbrella" not in os.listdir(mount.mountpoint)
            invalidate(mount)
        # a walk (listings may come in bulk, from the sandbox's find)
        seen = sorted(os.path.relpath(os.path.join(r, f), mount.path(d))
                      for r, ds, fs in os.walk(mount.path(d)) for f in ds + fs)
        assert seen == ["keep", "sub", "sub/kept"]
        assert b'"id"' in read_file(mount.path(".mainbrella"))   # still the control file
    finally:
        sh(service, container, "rm -f /workspace/.mainbrella")
    log = wait_log(mount, r"'/%s/sub': not showing '\.fuse_hidden9'" % d)
    for name in names + [".mbfs-sh-x"]:
        line = "listing of '/%s': not showing '%s': the name is reserved for mbfs" % (d, name)
        assert log.count(line) == 1, (line, log)
    assert log.count("listing of '/': not showing '.mainbrella'") == 1, log
    assert "listing of '/%s/sub': not showing '.fuse_hidden9'" % d in log, log


BAD = [  # the sandbox's name, what the bad server says instead, the line logged
    ("nulname", "nul\\u0000name", "'nul\\x00...': it holds a NUL byte"),
    ("slashname", "sl/ash", "'sl/ash': it holds a '/'"),
    ("dotname", ".", "'.': no directory entry has that name"),
    ("dotdotname", "..", "'..': no directory entry has that name"),
    ("emptyname", "", "'': it is empty"),
    ("dupname", "good1", "'good1': it is listed twice"),
]


def test_a_bad_servers_listing_shows_only_good_names(service, container, need_fuse):
    d = unique("bad")
    sh(service, container, "mkdir '/workspace/%s' && cd '/workspace/%s' && printf 1 > good1 && "
       "printf 22 > good2 && touch %s" % (d, d, " ".join(b[0] for b in BAD)))
    service.fault(route="GET /containers/files/list", count=1000, match=d,
                  rewrite=[['"%s"' % real, '"%s"' % sent] for real, sent, _ in BAD])
    m = mbtest.Mount(service, container, options=["bulk_read=0"])
    try:
        for _ in range(2):   # each name logged once, not at every listing
            assert sorted(os.listdir(m.path(d))) == ["good1", "good2"]
            assert os.stat(m.path(d, "good2")).st_size == 2
            with pytest.raises(FileNotFoundError):
                os.lstat(m.path(d, "nul"))   # what cJSON would have cut it to
            invalidate(m)
    finally:
        rc = m.unmount()
        service.clear_faults()
    log = m.log()
    m.check_clean_log()
    assert rc == 0, log
    for _, _, line in BAD:
        assert log.count("listing of '/%s': not showing %s" % (d, line)) == 1, (line, log)


def test_a_name_that_is_not_utf8_hides_only_itself(service, container, mount):
    """The list route fails a whole page over one name that is not UTF-8
    (409 unsupported_file_name): the mount lists that directory in bulk
    instead, and drops just that name, with a warning."""
    d = unique("utf")
    sh(service, container, "mkdir -p /workspace/%s/sub && cd /workspace/%s && "
       "touch good \"$(printf 'bad\\377')\" sub/x" % (d, d))
    assert sorted(os.listdir(mount.path(d))) == ["good", "sub"]
    assert os.listdir(mount.path(d, "sub")) == ["x"]
    os.stat(mount.path(d, "good"))
    wait_log(mount, r"listing of '/%s': not showing 'bad\\xff': it is not UTF-8" % d)
    # and at the mount's root too
    sh(service, container, "touch \"/workspace/$(printf 'top\\376')\"")
    try:
        invalidate(mount)
        assert d in os.listdir(mount.mountpoint)
    finally:
        sh(service, container, "rm -f \"/workspace/$(printf 'top\\376')\"")


def test_a_cold_ls_of_the_guests_root_keeps_names_with_a_newline(service, need_fuse, request):
    """A mount of the guest's /: its entries are listed by find with an
    empty directory name; one holding a newline still sends the listing
    the list route's way, which shows it."""
    ident = service.create_container()
    request.addfinalizer(lambda: service.delete_container(ident))
    sh(service, ident, "touch \"/$(printf 'nl\\nname')\" /plain && ln -s \"$(printf 't\\nx')\" /nlsym")
    m = mbtest.Mount(service, ident, remote="/")
    request.addfinalizer(m.unmount)
    got = os.listdir(m.path())
    assert {"plain", "nl\nname", "nlsym"} <= set(got), got
    os.lstat(m.path("nl\nname"))
    assert os.readlink(m.path("nlsym")) == "t\nx"
