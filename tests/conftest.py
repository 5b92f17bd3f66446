"""Fixtures for the mbfs and mbexec suites: one local service per module,
a fresh container per test module, a mount per test that always unmounts."""
import os
import pytest

import mbtest
from test_mbfs_helpers import finish


# `make test-quick` (pytest -m quick): a minute's worth of the suite that
# touches every layer once: mbexec's basics, bytes and names through the
# mount, write-back, mbfs's command line, the common code, the README.
# On 2 cores these files took 60 s with -n 4 on 2026-12-02.
QUICK_FILES = {
    "test_common.py",
    "test_mbexec_basic.py",
    "test_mbfs_cli.py",
    "test_mbfs_data.py",
    "test_mbfs_namespace.py",
    "test_mbfs_writeback.py",
    "test_readme.py",
}

# The files that take longest, longest first (seconds summed over their
# tests with -n 8 on 2 cores, 2026-12-02). They are handed out first, so
# that with -n none of them starts last and keeps one worker busy alone
# while the others are done; the rest keep their order. A stale list only
# costs time.
LONG_FILES = (
    "test_mbexec_stream.py",     # 107 s (one 90 s command)
    "test_mbexec_output.py",     # 105 s
    "test_mbexec_lost.py",       # 95 s
    "test_mbexec_lost_keys.py",  # 90 s
    "test_mbexec_hosted.py",     # 82 s
    "test_mbfs_writeback.py",    # 70 s
    "test_mbexec_edges.py",      # 65 s
    "test_common.py",            # 61 s
    "test_hostile_exec.py",      # 18-68 s
    "test_mbexec_signals.py",    # 48 s
    "test_mbexec_shared.py",     # 39 s
    "test_mbfs_outage.py",       # 38 s
    "test_mbfs_large.py",        # 37 s
)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running test (still part of make check)")
    config.addinivalue_line("markers", "quick: part of make test-quick (set by file in conftest.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in QUICK_FILES:
            item.add_marker(pytest.mark.quick)
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))


@pytest.fixture(scope="module")
def service():
    svc = mbtest.Service()
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def container(service):
    ident = service.create_container()
    yield ident
    service.delete_container(ident)


@pytest.fixture
def need_fuse():
    if not mbtest.fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")


@pytest.fixture
def mount(service, container, need_fuse):
    m = mbtest.Mount(service, container)
    yield m
    rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, "mbfs exited %s: %s" % (rc, log[-3000:])


@pytest.fixture
def no_faults_left(service):
    """Faults a test set on the service end with it (suites that inject
    faults use it in every test: pytestmark)."""
    yield
    service.clear_faults()


@pytest.fixture
def wb(service, container, need_fuse):
    """A mount with write-back (the default), checked clean at unmount."""
    m = mbtest.Mount(service, container, writeback=True)
    yield m
    finish(m)
