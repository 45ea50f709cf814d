#!/usr/bin/env bash
# Session 12's first call, on one H200 only: issue 15's out-of-sample run of the frozen protocol (roofline,
# then the model's scores), then burst_power.py (an H200's burst ceiling, for issue 13's bound). On any other
# board it does nothing (exit 3), so that the machine can be given back at once.
#
#   OUT=/dir scripts/plan_s12a.sh          (scripts/device_bg.sh start WAIT plan_s12a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then echo "no H200 here"; exit 3; fi
ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh roofline model burst
