#!/usr/bin/env bash
# Prepared in session 18 for the next device session (frozen in the commit that added it; not yet run): graph replay's
# groups ranked by CUPTI's busy time in the whole step (session 18's fix: the host timings came out at nothing, so
# replays without a design measured the first groups in capture order).
#  1. the GPU tests;
#  2. the transformer's and ResNet-50's (channels_last) replay in two separate processes each, then
#     benchmarks/replay_across.py: the top five groups by busy time now, the step's largest kernels (issue 13's
#     3 % from one run to the next); the note of each replay must read "the largest by busy time in the whole step
#     (CUPTI)"; ResNet-50 with 200 s per process (its groups' σ about 0.01 J at 150 s in session 18).
# About 12 minutes on an H100.
#
#   OUT=/dir scripts/plan_s19a.sh          (scripts/device_bg.sh start WAIT plan_s19a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 OUT="$OUT" scripts/device.sh gputest across
REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=200 REPLAY_LIMIT=300 SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh across
