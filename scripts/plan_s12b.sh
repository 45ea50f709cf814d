#!/usr/bin/env bash
# Session 12's main call, on whatever single GPU comes:
#   an H200: issue 15's out-of-sample run of the frozen protocol (roofline, then the model's scores), then
#            burst_power.py (an H200's burst ceiling);
#   else:    the GPU tests, then the attribution of both real training loops (validate_attribution_real.py) with
#            replay's top groups chosen by the design's in-step energy (session 12), 15 of them, so that the
#            attribution's top 10 can be set against isolated replay energies; rules otherwise as committed.
#
#   OUT=/dir scripts/plan_s12b.sh          (scripts/device_bg.sh start WAIT plan_s12b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh roofline model burst
else
  MAX_LARGE=2 ATTRIBUTION_LIMIT=1150 OUT="$OUT" scripts/device.sh gputest attribution
fi
