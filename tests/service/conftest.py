# Fixtures for the local service's own contract suite: a session service, extra
# services with options, and fresh containers that are always deleted afterwards.

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from svchelpers import Service, create_container  # noqa: E402


@pytest.fixture(scope="session")
def service(tmp_path_factory):
    svc = Service(str(tmp_path_factory.mktemp("svc")))
    yield svc
    rc, log = svc.stop()
    assert rc == 0, log
    assert "Traceback" not in log, log


@pytest.fixture
def start_service(tmp_path):
    started = []

    def start(*extra):
        svc = Service(str(tmp_path / ("svc%d" % len(started))), *extra)
        started.append(svc)
        return svc
    yield start
    for svc in started:
        rc, log = svc.stop()
        assert rc == 0, log
        assert "Traceback" not in log, log


@pytest.fixture
def api(service):
    a = service.api.fresh()
    yield a
    a.close()


@pytest.fixture
def container(api):
    """A `python` image container: it has /workspace, its working directory."""
    c = create_container(api, catalogId="python")
    yield c
    c.delete()


@pytest.fixture
def node_container(api):
    """A container of the default image (node): /root, no /workspace."""
    c = create_container(api)
    yield c
    c.delete()
