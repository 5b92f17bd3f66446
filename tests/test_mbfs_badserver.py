"""A bad server: pieces of a bulk read whose bytes are not what the guest
wrote (one bit flipped, or cut short). mbfs refuses what it does not
understand with one log line, falls back to a request per directory or per
file, shows the sandbox's truth, and stays up: no crash, no sanitizer
report, the mount goes on working."""
import os
import time

import pytest

import mbtest
from test_mbfs_bulkread import GET, guest_entries, mount_entries, seed, small_dir, walk_tree
from test_mbfs_helpers import finish, read_file

PIECES = ".mbfs-dl-"     # the bulk reads' pieces on the guest

pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def bmount(service, container, need_fuse):
    m = mbtest.Mount(service, container)
    yield m
    finish(m)     # exit 0, no sanitizer report


def wait_log(m, text, timeout=60):
    """The mount's log once it holds text (logged by a background job)."""
    deadline = time.monotonic() + timeout
    while text not in m.log():
        assert m.proc.poll() is None, "mbfs died: " + m.log()[-3000:]
        assert time.monotonic() < deadline, "no log line %r: %s" % (text, m.log()[-3000:])
        time.sleep(0.05)
    return m.log()


def still_works(m, files):
    assert m.proc.poll() is None, m.log()[-3000:]
    assert os.listdir(m.path())
    assert os.path.exists(m.path(".mainbrella"))
    for name in sorted(files)[:3]:
        assert read_file(m.path(name)) == files[name], name


def big_walk_tree(service, container):
    """walk_tree's on the sandbox, with listings past the 384 KiB that a
    walk's answer carries itself (pack.sh): they come in pieces, GET as a
    bulk read's."""
    top, files = walk_tree()
    seed(service, container, files)
    from test_mbfs_helpers import sh
    sh(service, container, "mkdir /workspace/%s/d00/many && cd /workspace/%s/d00/many && "
       "i=1000; while [ $i -lt 5000 ]; do : >$i-%s; i=$((i + 1)); done" % (top, top, "n" * 90))
    return top, files


@pytest.mark.parametrize("corrupt,at,said", [
    # the first record's type letter: not one find prints
    ("flip", 0, "its listings are damaged, not kept: listing record 0: bad type field"),
    # the last NUL: the last record is cut short (the daemon's old crash)
    ("flip", -1, "its listings are damaged, not kept: listing record"),
    # a piece shorter than pack.sh said
    ("truncate", -1, "failed, directories are listed one by one: piece 0 of a download has"),
])
def test_a_corrupted_listing_piece_is_refused_and_each_directory_listed(
        service, container, bmount, corrupt, at, said):
    top, files = big_walk_tree(service, container)
    want = guest_entries(service, container, top)
    service.fault(route=GET, count=100, match=PIECES, corrupt=corrupt, atByte=at)
    assert mount_entries(bmount.path(top)) == want
    log = wait_log(bmount, said)
    assert not mbtest.sanitizer_report(log), log
    service.clear_faults()
    still_works(bmount, files)


def test_listings_in_a_walks_answer_that_are_not_base64_are_refused(service, container, bmount):
    """A small walk's listings come in pack.sh's answer: when they are not
    base64 there, none is kept and each directory is listed."""
    top, files = walk_tree()
    seed(service, container, files)
    want = guest_entries(service, container, top)
    # the JSON answer's stdout: "NOW 0 0 0\n@BASE64"
    service.fault(route="POST /containers/exec", count=1000, rewrite=[["0 0 0\\n@", "0 0 0\\n@*"]])
    assert mount_entries(bmount.path(top)) == want
    log = wait_log(bmount, "directories are listed one by one: pack.sh's listings in its "
                           "answer are not base64")
    assert not mbtest.sanitizer_report(log), log
    service.clear_faults()
    still_works(bmount, files)


@pytest.mark.parametrize("corrupt,at,said", [
    # the first member's name: its header's checksum no longer holds
    ("flip", 0, "cannot unpack the archive: the header at 0 of the archive has a bad checksum"),
    # its size field: the checksum no longer holds either
    ("flip", 124 + 3, "cannot unpack the archive: the header at 0 of the archive has a bad checksum"),
    # a piece shorter than pack.sh said
    ("truncate", -100, "failed, files are read one by one: piece 0 of a download has"),
])
def test_a_corrupted_archive_piece_is_refused_and_the_files_read_one_by_one(
        service, container, bmount, corrupt, at, said):
    d, files = small_dir(n=20)
    seed(service, container, files)
    service.fault(route=GET, count=100, match=PIECES, corrupt=corrupt, atByte=at)
    for name in sorted(files):
        assert read_file(bmount.path(name)) == files[name], name
    log = wait_log(bmount, said)
    assert not mbtest.sanitizer_report(log), log
    service.clear_faults()
    still_works(bmount, files)
