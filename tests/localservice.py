#!/usr/bin/python3
# The local Mainbrella service: a faithful emulator of the hosted container
# API (shared/mainbrella-api.md) for tests, the demo and benchmarks.
#
#   python3 tests/localservice.py --listen 127.0.0.1:PORT --state DIR [options]
#
# Behaves like the hosted runtime by default (tests/mbsvc/NOTES.md); each
# --lenient-*/--legacy-* option and the knobs below relax one point for a test.
# Prints "listening http://HOST:PORT" (and "api-key mb_..." when it made one
# up) on stdout once it accepts connections; logs go to stderr.  SIGTERM or
# SIGINT stops every container and exits 0.  With --exports (`make serve`) it
# prints instead the two `export` lines a user pastes into another shell.
# Code lives in tests/mbsvc/.

import argparse
import logging
import os
import secrets
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mbsvc import config  # noqa: E402
from mbsvc.guest import isolation_available  # noqa: E402
from mbsvc.server import Server  # noqa: E402
from mbsvc.service import Service, valid_api_key  # noqa: E402

log = logging.getLogger("mbsvc")


def parse_args(argv):
    p = argparse.ArgumentParser(description="local Mainbrella service")
    p.add_argument("--listen", required=True, metavar="HOST:PORT", help="port 0 picks a free port")
    p.add_argument("--state", required=True, metavar="DIR", help="directory for container filesystems")
    p.add_argument("--api-key", help="bearer key (default: $MAINBRELLA_API_KEY, else generated)")
    p.add_argument("--latency-ms", type=int, default=0, help="delay before every response")
    p.add_argument("--plan", choices=sorted(config.PLANS), default="builder")
    p.add_argument("--idle-timeout-ms", type=int, default=0, help="override the plan's idle timeout")
    p.add_argument("--job-renew-ms", type=int, default=0, help="override the 15 s idle renewal of running jobs")
    p.add_argument("--retention-ms", type=int, default=0, help="override the 1 h execution retention")
    p.add_argument("--stream-ms", type=int, default=0, help="override the 30 s SSE rotation")
    p.add_argument("--log-level", default=os.environ.get("MBSVC_LOG", "INFO"))
    p.add_argument("--enforce-sizes", action="store_true",
                   help="hold each container to its size's CPU share and memory (cgroups; default: "
                        "the host's, so that CI is not throttled)")
    p.add_argument("--exports", action="store_true",
                   help="print the URL and the key as two shell export lines (make serve)")
    g = p.add_argument_group("deviations from the hosted runtime (for tests that need them)")
    g.add_argument("--default-catalog", choices=config.CATALOG_IDS, default=config.DEFAULT_CATALOG,
                   help="image started without catalogId (hosted: node, no /workspace)")
    g.add_argument("--guest-uid", type=int, default=0,
                   help="uid/gid that guest commands and file operations run as (hosted: 0)")
    g.add_argument("--reaping-init", action="store_true", help="guest PID 1 reaps orphans (hosted: never)")
    g.add_argument("--lenient-exec", action="store_true",
                   help="exec and jobs end 50 ms after the exit even if a child holds a pipe; "
                        "a client disconnect does not kill an exec")
    g.add_argument("--lenient-listing", action="store_true",
                   help="files/list skips an entry that vanished instead of failing with 403")
    g.add_argument("--legacy-exit-codes", action="store_true",
                   help="no timeout wrapper on jobs; a signal death reports 128+N instead of null")
    g.add_argument("--output-events", choices=("batched", "per-read"), default="batched",
                   help="job output events: batched (newest runtime) or one per read with a cap of 510 (d93e920)")
    g.add_argument("--lenient-idle", action="store_true",
                   help="calls renew idle time at their end too; jobs renew every min(15 s, idle/3)")
    g.add_argument("--lenient-auth", action="store_true",
                   help="accept any key format and compare keys case-insensitively")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        p.error("--listen must be HOST:PORT")
    args.host, args.port = host.strip("[]"), int(port)
    for name in ("latency_ms", "idle_timeout_ms", "job_renew_ms", "retention_ms", "stream_ms"):
        if getattr(args, name) < 0:
            p.error("--%s must not be negative" % name.replace("_", "-"))
    if not 0 <= args.guest_uid < config.UID_RANGE:
        p.error("--guest-uid must be in 0..%d" % (config.UID_RANGE - 1))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="localservice: %(levelname)s %(name)s: %(message)s")
    generated = False
    if not args.api_key:
        args.api_key = os.environ.get("MAINBRELLA_API_KEY") or ""
    if not args.api_key:
        args.api_key = "mb_" + secrets.token_hex(32)
        generated = True
    if not args.lenient_auth and not valid_api_key(args.api_key):
        print("localservice: the API key must be mb_ followed by 64 hex digits (or pass --lenient-auth)",
              file=sys.stderr)
        return 2
    args.state = os.path.abspath(args.state)
    os.makedirs(args.state, exist_ok=True)
    os.chmod(args.state, 0o700)
    args.isolated = isolation_available()
    if not args.isolated:
        log.warning("not root or no unshare: running DEGRADED (no namespaces; guest paths are "
                    "translated, /tmp is the host's, processes run as %s)", os.getuid())
    service = Service(args)
    server = Server((args.host, args.port), service)
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    url = "http://%s:%d" % (host if ":" not in host else "[%s]" % host, port)
    if args.exports:
        print("export MAINBRELLA_API_URL=%s\nexport MAINBRELLA_API_KEY=%s\n"
              "# paste those two lines into the shell where you run mbfs and mbexec;\n"
              "# Ctrl-C here stops the service and every container in it" % (url, args.api_key),
              flush=True)
    else:
        print("listening " + url, flush=True)
        if generated:
            print("api-key " + args.api_key, flush=True)
    log.info("plan %s, state %s, isolation %s", args.plan, args.state, "on" if args.isolated else "OFF")
    while not stop.wait(1.0):
        pass
    log.info("shutting down")
    server.shutdown()
    service.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
