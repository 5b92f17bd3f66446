#!/bin/sh
# cleanup.sh: remove a finished run's directory once its output is collected.
#
# Usage (after lib.sh): cleanup.sh
# shellcheck disable=SC2154 # B, V and R are set by the caller
base_ok || { echo '@mbx gone'; exit 0; }
rm -rf "$R"
echo '@mbx ack clean'
