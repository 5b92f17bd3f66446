"""Fixtures for the mbfs and mbexec suites: one local service per module,
a fresh container per test module, a mount per test that always unmounts;
and the run guard's hooks (runguard.py): every pytest process that runs
tests has a scope of its own, ended at the session's end, at SIGTERM, or
by its watchdog when the process dies; what a session leaves behind
fails the run."""
import faulthandler
import os
import signal
import sys
import tempfile
import time

import pytest

import mbtest
import runguard
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


class Guard:
    run = None        # the run's directory (the controller made it)
    scope = None      # this process's, when it runs tests
    pipe = None       # to this process's watchdog
    running = set()   # node ids of the tests running now (all workers')
    checked = False


def _runs_tests_here(config):
    if hasattr(config, "workerinput"):
        return True
    n = getattr(config.option, "numprocesses", None)
    return not n or getattr(config.option, "dist", "no") == "no"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running test (still part of make check)")
    config.addinivalue_line("markers", "quick: part of make test-quick (set by file in conftest.py)")
    worker = getattr(config, "workerinput", None)
    if worker is None:
        Guard.run = tempfile.mkdtemp(prefix="mbt-", dir=os.environ.get("MB_TEST_TMP", "/var/tmp"))
        os.chmod(Guard.run, 0o755)      # other users' tests cross it (allow_other)
        os.environ[runguard.RUN_ENV] = Guard.run
    else:
        Guard.run = os.environ[runguard.RUN_ENV]
    if _runs_tests_here(config):
        Guard.scope = os.path.join(Guard.run, worker["workerid"] if worker else "main")
        os.makedirs(Guard.scope, exist_ok=True)
        os.chmod(Guard.scope, 0o755)
        # every process a test starts inherits both: the scope's marker,
        # and where mbtest makes mountpoints, services and caches
        os.environ[runguard.SCOPE_ENV] = Guard.scope
        os.environ["MB_TEST_TMP"] = Guard.scope
        config.option.basetemp = os.path.join(Guard.scope, "tmp")
    Guard.pipe = runguard.start_watchdog(Guard.scope or Guard.run)
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:      # not the main thread: the watchdog still cleans up
        pass


def _on_sigterm(signum, frame):
    """A SIGTERM (CI's time bound, a user's kill): say what was running
    and where it waited, end what this process made, then die of it."""
    sys.stderr.write("\nrunguard: SIGTERM to pytest (pid %d) while running: %s\n"
                     % (os.getpid(), ", ".join(sorted(Guard.running)) or "no test"))
    faulthandler.dump_traceback(all_threads=True)
    for line in runguard.clean(Guard.scope or Guard.run):
        sys.stderr.write("runguard: ended %s\n" % line)
    sys.stderr.flush()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def pytest_runtest_logstart(nodeid, location):
    Guard.running.add(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    Guard.running.discard(nodeid)


def _left_behind(scope, grace=10.0):
    """What scope still holds once every test and fixture has ended,
    given a moment for processes that are on their way out."""
    deadline = time.monotonic() + grace
    while True:
        found = runguard.describe(scope)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """A worker checks its own scope and leaves what it found for the
    controller; the controller checks the run, fails it when anything was
    left behind, and ends all of it."""
    config = session.config
    found = []
    if Guard.scope:
        found = _left_behind(Guard.scope)
        runguard.clean(Guard.scope)
    if hasattr(config, "workerinput"):
        if found:
            with open(os.path.join(Guard.run, "left-" + config.workerinput["workerid"]), "w") as f:
                f.write("\n".join(found) + "\n")
        return
    for name in sorted(os.listdir(Guard.run)) if os.path.isdir(Guard.run) else ():
        if name.startswith("left-"):
            with open(os.path.join(Guard.run, name)) as f:
                found += ["%s: %s" % (name[5:], line) for line in f.read().splitlines()]
    found += _left_behind(Guard.run, grace=1.0)
    runguard.clean(Guard.run)
    Guard.checked = True
    if found:
        sys.stderr.write("\nrunguard: the run left these behind (now ended):\n  %s\n" % "\n  ".join(found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    if Guard.pipe is not None:
        runguard.clean(Guard.scope or Guard.run)
        os.write(Guard.pipe, b"bye\n")
        os.close(Guard.pipe)
        Guard.pipe = None


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
