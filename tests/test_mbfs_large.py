"""Large files at the API's pace: an upload PUTs its parts while rounds of
joining place the ones already PUT, the last exec only the tail; a
sequential read's pieces come in the background while it reads. Right bytes and
bounded requests, also when a part PUT, a round's exec or a piece GET fails
once."""
import errno
import os
import time

import pytest

import mbtest
from test_mbfs_helpers import (CONTROL, MiB, guest_sha, invalidate, no_pieces_left, read_file, sh,
                               sha, sync, unique)

PUT = "PUT /containers/files"
GET = "GET /containers/files"
EXEC = "POST /containers/exec"
MKDIR = "POST /containers/files/mkdir"
SIZE = 40 * MiB + 5          # 41 parts: rounds (of 16 or more) and a tail
PARTS = 41


pytestmark = pytest.mark.usefixtures("no_faults_left")


def requests(service, route):
    return mbtest.requests_for(service.stats(), route)


def no_staging(service, container):
    assert ".mbfs-up-" not in sh(service, container, "ls -A /workspace")
    # an upload's parts are in a directory of its own, /tmp/.mbfs-up-HEX
    left = sh(service, container, "ls -d /tmp/.mbfs-up-* 2>/dev/null || true").split()
    assert not left, left


def write_like_dd(path, data):
    """As dd of=PATH does: the output is dup2()ed and the first descriptor
    closed before the first write (a flush of the file, still empty)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    out = os.dup(fd)
    os.close(fd)
    try:
        # the flusher of write-back meets the file it was given, now
        # large and still open ('sync' makes it run at once)
        os.write(out, data[:2 * MiB])
        with open(os.path.join(os.path.dirname(path), CONTROL), "w") as c:
            c.write("sync\n")
        for off in range(2 * MiB, len(data), MiB):
            os.write(out, data[off:off + MiB])
    finally:
        os.close(out)


def test_large_write_is_one_upload_in_rounds(service, container, mount):
    name = unique("big")
    data = os.urandom(SIZE)
    service.reset_stats()
    write_like_dd(mount.path(name), data)
    # each part PUT once (the file is uploaded once, at its close), one
    # staging directory, and a few execs: the rounds and the last one
    # (counted before the test's own exec below). One write-back batch of
    # the still empty file (a PUT and an exec) may leave first if this
    # process is held up for the queue's delay between close and write.
    assert PARTS <= requests(service, PUT) <= PARTS + 1
    assert requests(service, MKDIR) == 1
    assert 1 <= requests(service, EXEC) <= 2 + PARTS // 16
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    no_staging(service, container)
    assert read_file(mount.path(name)) == data


def test_a_large_new_file_gets_its_mode_with_the_last_join(service, container, mount):
    """The mode a file was created with comes with the exec that renames
    it into place: no chmod request after."""
    name = unique("bigmode")
    data = os.urandom(3 * MiB + 7)
    service.reset_stats()
    old = os.umask(0o022)
    try:
        fd = os.open(mount.path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o751)
    finally:
        os.umask(old)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    assert requests(service, "PATCH /containers/files/chmod") == 0
    assert sh(service, container, "stat -c %a /workspace/" + name).strip() == "751"
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    assert os.stat(mount.path(name)).st_mode & 0o777 == 0o751
    no_staging(service, container)


@pytest.mark.parametrize("when", ["before", "after"])
def test_large_write_with_a_part_put_failing_once(service, container, mount, when):
    name = unique("bigput")
    data = os.urandom(SIZE)
    service.reset_stats()
    service.fault(route=PUT, count=1, match="mbfs-up", status=503, error="files_unavailable",
                  when=when)
    with open(mount.path(name), "wb") as f:
        f.write(data)
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    assert requests(service, PUT) == PARTS + 1
    no_staging(service, container)


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("when", ["before", "after"])
def test_large_write_with_an_exec_failing_once(service, container, mount, when, nth):
    """The first exec is a round (or, if the PUTs outran it, the last
    join); the second, a later round or the last join. A failed round is
    left to the last join; an unconfirmed last join is checked (hash)
    before it is repeated; the result is the same file either way."""
    name = unique("bigexec")
    data = os.urandom(SIZE)
    with open(mount.path(name), "wb") as f:
        f.write(data[:MiB])
    service.reset_stats()
    if nth == 2:
        # rules are taken in order: a delay of 0 lets the first exec pass
        service.fault(route=EXEC, count=1, delayMs=0)
    service.fault(route=EXEC, count=1, status=503, error="execution_unavailable", when=when)
    with open(mount.path(name), "wb") as f:
        f.write(data)
    assert guest_sha(service, container, "/workspace/" + name) == sha(data)
    assert requests(service, PUT) == PARTS
    # the rounds, the last join, its repeat, a hash of the target
    assert requests(service, EXEC) <= 4 + PARTS // 16
    no_staging(service, container)


def read_all(path, chunk=MiB):
    with open(path, "rb") as f:
        data = b""
        while True:
            b = f.read(chunk)
            if not b:
                return data
            data += b


def test_large_read_fetches_rounds_and_survives_a_failed_get(service, container, mount):
    name = unique("bigread")
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (SIZE, name))
    want = guest_sha(service, container, "/workspace/" + name)
    service.reset_stats()
    service.fault(route=GET, count=1, match="mbfs-dl", status=503, error="files_unavailable")
    assert sha(read_all(mount.path(name))) == want
    # each piece once (plus the failed one), no piece twice; the pieces
    # are cut in a few rounds (the first with the file's size), while
    # the ones cut before are fetched
    assert requests(service, GET) == PARTS + 1
    assert 2 <= requests(service, EXEC) <= 2 + PARTS // 16
    assert no_pieces_left(service, container)


def test_large_read_survives_a_cut_failing_once(service, container, mount):
    name = unique("bigcut")
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (SIZE, name))
    want = guest_sha(service, container, "/workspace/" + name)
    service.reset_stats()
    # the first exec (the file's size, its first pieces) goes through; the
    # next, a later round of cutting, fails once: a later round only cuts
    # and removes again what it did before, so it is run once more
    service.fault(route=EXEC, count=1, delayMs=0)
    service.fault(route=EXEC, count=1, status=503, error="execution_unavailable")
    assert sha(read_all(mount.path(name))) == want
    assert requests(service, GET) == PARTS
    assert 3 <= requests(service, EXEC) <= 3 + PARTS // 16
    assert no_pieces_left(service, container)


def test_pieces_go_as_they_are_fetched(service, container, mount):
    name = unique("bigtmp")
    size = 100 * MiB
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (size, name))
    want = guest_sha(service, container, "/workspace/" + name)
    service.reset_stats()
    with open(mount.path(name), "rb") as f:
        data = b""
        while len(data) < 70 * MiB:
            data += f.read(MiB)
        # the guest's /tmp holds the pieces cut ahead, not the ones
        # fetched: never a second copy of the whole file
        left = sh(service, container, "ls -A /tmp/.mbfs-dl-*").split()
        assert "p.00000" not in left and len(left) < size // MiB - 20, left
        data += f.read()
    assert sha(data) == want
    assert requests(service, GET) == size // MiB
    assert requests(service, EXEC) <= 2 + size // MiB // 16
    assert no_pieces_left(service, container)


def test_a_reader_that_stops_early_stops_its_read_ahead(service, container, mount):
    """A sequential reader's pieces come in the background while it reads;
    when it closes the file part way, the GETs stop (only those in flight
    end) and the pieces go."""
    name = unique("bighead")
    size = 200 * MiB
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (size, name))
    want = sh(service, container, "head -c %d /workspace/%s | sha256sum" % (8 * MiB, name)).split()[0]
    service.reset_stats()
    with open(mount.path(name), "rb") as f:
        head = f.read(8 * MiB)
    cuts = requests(service, EXEC)   # before the test's own below
    assert sha(head) == want
    assert no_pieces_left(service, container)
    # the read-ahead of 8 pieces read (up to 15 further), not the file
    assert 8 <= requests(service, GET) <= 8 + 16 + 4
    assert cuts <= 3


def test_a_write_while_pieces_come_in_the_background(service, container, mount):
    """A write needs the whole file: it waits for the pieces on their way
    and fetches the rest; each piece is fetched once."""
    name = unique("bigrw")
    sh(service, container, "head -c %d /dev/urandom > /workspace/%s" % (SIZE, name))
    with open(mount.path(name), "rb") as f:
        data = bytearray(f.read())
    service.reset_stats()
    invalidate(mount)
    with open(mount.path(name), "r+b") as f:
        assert f.read(3 * MiB) == data[:3 * MiB]
        f.seek(20 * MiB)
        f.write(b"written while read ahead")
    data[20 * MiB:20 * MiB + 24] = b"written while read ahead"
    assert requests(service, GET) == PARTS
    sync(mount)
    assert guest_sha(service, container, "/workspace/" + name) == sha(bytes(data))
    assert no_pieces_left(service, container)


def sh_when_free(service, container, cmd, timeout=30):
    """sh, resent while the sandbox's 4 operations are taken (429
    execution_limit), as mbfs and mbexec do: a reader's read-ahead goes
    on in the background between its reads."""
    deadline = time.monotonic() + timeout
    while True:
        status, doc = service.request("POST", "/containers/exec", query=service.ident_query(container),
                                      body={"command": cmd, "timeoutMs": 30000})
        if status != 429 or time.monotonic() > deadline:
            assert status == 200 and doc["exitCode"] == 0, (status, doc)
            return doc["stdout"]
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["replaced", "rewritten"])
def test_a_file_changed_while_read_is_an_error(service, container, mount, how):
    name = unique("bigchg")
    path = "/workspace/" + name
    size = 80 * MiB + 5         # more than the first read has cut ahead
    sh(service, container, "head -c %d /dev/urandom > %s" % (size, path))
    with open(mount.path(name), "rb") as f:
        head = f.read(MiB)
        # pieces cut from here on are of another file: never mixed in
        if how == "replaced":
            sh_when_free(service, container, "head -c %d /dev/urandom > %s.n && mv %s.n %s"
                         % (size, path, path, path))
        else:
            sh_when_free(service, container, "head -c %d /dev/urandom > %s" % (size + 7, path))
        with pytest.raises(OSError) as e:
            while f.read(MiB):
                pass
        assert e.value.errno == errno.EIO
    assert len(head) == MiB
    # once the mount is told, the next open reads the new file
    invalidate(mount)
    assert sha(read_all(mount.path(name))) == guest_sha(service, container, path)
    assert no_pieces_left(service, container)


def test_a_large_file_written_to_is_fetched_whole_first(service, container, mount):
    # a write needs the whole file: every piece comes at once, cut while
    # the ones before are fetched
    name = unique("bigapp")
    # made on the sandbox, bytes known here: every line differs
    sh(service, container, "seq 1 9000000 | head -c %d > /workspace/%s" % (SIZE, name))
    data = "".join("%d\n" % i for i in range(1, 9000001)).encode()[:SIZE]
    service.reset_stats()
    with open(mount.path(name), "ab") as f:
        f.write(b"tail")
    assert requests(service, GET) == PARTS      # each piece once
    sync(mount)
    assert guest_sha(service, container, "/workspace/" + name) == sha(data + b"tail")
    assert no_pieces_left(service, container)


def test_a_read_far_ahead_while_pieces_are_cut_ahead(service, container, mount):
    # the first read starts cutting the next pieces in the background; a
    # read far past them needs a cut of its own: it waits for that one
    name = unique("bigseek")
    size = 100 * MiB + 3
    path = "/workspace/" + name
    sh(service, container, "head -c %d /dev/urandom > %s" % (size, path))
    want = sh(service, container, "tail -c 10 %s | od -An -v -tx1 | tr -d ' \\n'" % path)
    with open(mount.path(name), "rb") as f:
        assert len(f.read(1000)) == 1000
        f.seek(size - 10)
        assert f.read(10).hex() == want
    assert no_pieces_left(service, container)
