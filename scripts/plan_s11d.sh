#!/usr/bin/env bash
# Session 11's last call on one GPU: burst_power.py (on an H200, the first H200 burst ceiling), then the GPU tests
# against the installed wheel (the attribution now reads the shipped burst ceiling of its board).
#
#   OUT=/dir scripts/plan_s11d.sh          (scripts/device_bg.sh start WAIT plan_s11d runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OUT="$OUT" scripts/device.sh burst gputest
