"""mbexec and mbfs together with hour-long caches: a command's changes show
in the mount at once (the issue's check), and a command sees what was just
written through the mount."""
import os

import mbtest

LONG = ["attr_timeout=3600", "dir_timeout=3600", "negative_timeout=3600"]


def test_command_changes_show_at_once_with_long_timeouts(service, container, need_fuse):
    m = mbtest.Mount(service, container, options=LONG)
    try:
        d = m.path("longcache")
        os.mkdir(d)
        f = os.path.join(d, "f")
        with open(f, "w") as fh:
            fh.write("1\n")
        with open(f) as fh:
            assert fh.read() == "1\n"
        assert not os.path.exists(os.path.join(d, "new"))   # cached as missing
        p = mbtest.run_mbexec(service, ["sh", "-c", "echo 2 > f; echo x > new; rm -f gone"], cwd=d)
        assert p.returncode == 0, p.stderr
        with open(f) as fh:
            assert fh.read() == "2\n"
        assert sorted(os.listdir(d)) == ["f", "new"]
        # and the other way round: a write through the mount is seen by the next command
        with open(f, "w") as fh:
            fh.write("3\n")
        p = mbtest.run_mbexec(service, ["cat", "f"], cwd=d)
        assert p.returncode == 0 and p.stdout == b"3\n", p
    finally:
        rc = m.unmount()
    log = m.log()
    assert not mbtest.sanitizer_report(log), log
    assert rc == 0, log
