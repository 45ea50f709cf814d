#!/usr/bin/env bash
# Frozen in session 18 before it ran: the transformer step's graph replay in two separate processes on an H200
# (plan_s17a measured it on H100 GPU-c7661d05 this session), then benchmarks/replay_across.py: each group's isolated
# energy from one capture to the next (issue 13: reproducible within 3 %, on H100 and H200); the GPU tests first.
# About 4 minutes on an H200.
#
#   OUT=/dir scripts/plan_s18c.sh          (scripts/device_bg.sh start WAIT plan_s18c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 OUT="$OUT" scripts/device.sh gputest across
