#!/bin/sh
# heartbeat.sh: the client is alive but cannot poll now (its stdout is blocked).
#
# Usage (after lib.sh): heartbeat.sh
alive
echo '@mbx ack hb'
