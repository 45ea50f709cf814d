#!/usr/bin/env bash
# Frozen in session 18 before it ran: benchmarks/sensor_contention.py for 360 s instead of plan_s17a's 90 s (same
# rule: the mean launch + synchronise time per cycle, one sampler against none, two-sided against 3 %). Why: on H100
# GPU-c7661d05 the 90 s run gave -0.38 % [-3.95, +4.55] over 11 cycles, its 2 s halves' means moving by ±13 % with
# the host; four times the cycles should halve the interval if the cost is as small as it looked.
# About 8 minutes on an H100.
#
#   OUT=/dir scripts/plan_s18d.sh          (scripts/device_bg.sh start WAIT plan_s18d runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
CONTENTION_SECONDS=360 CONTENTION_LIMIT=430 OUT="$OUT" scripts/device.sh contention
