"""mbexec: the container going away under a running command."""
from test_mbexec_helpers import fake_mount, popen, rmtree


def test_container_stopped_mid_command_is_255(service):
    ident = service.create_container()
    d = fake_mount(service, ident)
    try:
        p = popen(service, ["sh", "-c", "echo started; sleep 300"], d)
        assert p.stdout.readline() == b"started\n"
        service.expire(ident)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 255, err
        msg = err.decode()
        assert "the sandbox %s (generation %s) is not running any more" % (
            ident["id"], ident["createdAt"]) in msg, msg
        assert "the command ended with it" in msg and "mbfs --create" in msg, msg
    finally:
        rmtree(d)
        service.delete_container(ident)


def test_stopped_container_before_start_says_not_started(service):
    ident = service.create_container()
    d = fake_mount(service, ident)
    try:
        service.expire(ident)
        p = popen(service, ["true"], d)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 255, err
        assert b"did not start" in err and b"is not running any more" in err, err
    finally:
        rmtree(d)
