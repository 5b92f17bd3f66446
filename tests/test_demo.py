"""The README's first command must stay true: the demo ends with total=42,
cleans up its mount, and leaves no service behind."""
import os
import subprocess

import pytest

import mbtest


def test_demo_prints_total_and_cleans_up():
    if not mbtest.fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")
    env = dict(os.environ, MB_BIN_DIR=mbtest.BIN_DIR)
    env.pop("MAINBRELLA_API_KEY", None)
    r = subprocess.run(["bash", os.path.join(mbtest.ROOT, "tests", "demo.sh")], cwd=mbtest.ROOT,
                       capture_output=True, timeout=300, env=env)
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, out + err
    lines = out.splitlines()
    i = lines.index("==> reading the report back through the mount")
    assert lines[i + 1] == "total=42", out
    assert "==> stopping the container" in out and "==> stopping the local service" in out
    mnt = os.path.join(mbtest.ROOT, "demo-mnt")
    assert not os.path.ismount(mnt)
    assert not mbtest.sanitizer_report(out + err), out + err
