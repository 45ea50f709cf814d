#!/usr/bin/env bash
# Session 10's first call on one GPU. On an H200 (none lent in sessions 7-9): issue 15's out-of-sample roofline run
# and the frozen model's scores, then the GPU tests. On any other board: the GPU tests (the capture that holds each
# new tensor's storage has not run on a GPU yet), then the attribution of both real training loops with replay's
# defaults since session 9 (every switched replay primed, every buffer its own). Raw CUPTI traces come back
# gzipped (large-*.gz) so that the attribution can be redone on a CPU.
#
#   OUT=/dir scripts/plan_s10.sh          (scripts/device_bg.sh start WAIT plan_s10 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh roofline model gputest
else
  MAX_LARGE=2 ATTRIBUTION_LIMIT=1150 OUT="$OUT" scripts/device.sh gputest attribution
fi
