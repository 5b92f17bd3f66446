"""mbexec: a full managed-execution history (32 per hour) gives a message
saying when the next slot frees up; the default strategy is unaffected."""
import re
import time
import uuid

from test_mbexec_helpers import fake_mount, jobs_created, mbx, rmtree


def fill_history(service, ident):
    made = 0
    deadline = time.time() + 60
    while made < 32 and time.time() < deadline:
        status, doc = service.request("POST", "/containers/executions",
                                      query=service.ident_query(ident),
                                      body={"command": "true"},
                                      headers={"Idempotency-Key": uuid.uuid4().hex})
        if status == 429 and doc["error"] == "execution_limit":
            time.sleep(0.1)   # 4 running at once: wait for one to end
            continue
        if status == 429:
            assert doc["error"] == "execution_history_limit"
            return
        assert status == 202, (status, doc)
        made += 1


def test_history_limit_message_and_exec_mode_still_works(service, container):
    d = fake_mount(service, container)
    try:
        fill_history(service, container)
        p = mbx(service, ["--mode", "managed", "true"], d)
        assert p.returncode == 255
        err = p.stderr.decode()
        m = re.search(r"frees up at (\d\d:\d\d:\d\d) \(in (\d+) min\)", err)
        assert m, err
        assert 55 <= int(m.group(2)) <= 60, err
        assert "did not start" in err
        # -t and -i no longer use managed executions
        assert "without --mode managed" in err and "-t/-i" not in err, err
        # the default strategy does not use the history
        jobs = jobs_created(service)
        p = mbx(service, ["sh", "-c", "echo fine"], d)
        assert p.returncode == 0 and p.stdout == b"fine\n", p.stderr
        assert jobs_created(service) == jobs
    finally:
        rmtree(d)
