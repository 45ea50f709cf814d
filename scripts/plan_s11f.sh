#!/usr/bin/env bash
# Session 11's last call: burst_power.py (on an H200, the first H200 burst ceiling), then graph replay of the
# transformer step (a group whose timing gives nothing now takes its isolated time less the base's).
#
#   OUT=/dir scripts/plan_s11f.sh          (scripts/device_bg.sh start WAIT plan_s11f runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
REPLAY_ONLY=transformer REPLAY_BUDGET_S=100 REPLAY_LIMIT=160 OUT="$OUT" scripts/device.sh burst replay
