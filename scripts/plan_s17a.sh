#!/usr/bin/env bash
# Prepared in session 16 for the next device session (frozen in the commit that added it; not yet run):
#  1. benchmarks/sensor_contention.py: a launch + synchronise loop's every iteration with no sensors, archline's, and
#     16 samplers (90 s, 2 s halves): whether archline's sensors delay a program's CUDA calls (the mean per cycle,
#     two-sided against 3 %);
#  2. graph replay of the transformer step in two separate processes, then benchmarks/replay_across.py: each group's
#     isolated energy from one capture to the next (issue 13's 3 % from one run to the next).
# About 8 minutes on an H100.
#
#   OUT=/dir scripts/plan_s17a.sh          (scripts/device_bg.sh start WAIT plan_s17a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 OUT="$OUT" scripts/device.sh contention across
