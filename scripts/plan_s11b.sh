#!/usr/bin/env bash
# Session 11's call on one GPU. First, on any board: benchmarks/burst_power.py (does a short bf16 GEMM between idle
# gaps draw more than the power limit while it runs?). Then on an H200: issue 15's out-of-sample run of protocol v2
# (roofline model); on any other board: the transformer step's default tracing overhead with 15 alternating pairs
# (session 10's 7 pairs gave +2.03 %, interval +0.13 … +3.87 %).
#
#   OUT=/dir scripts/plan_s11b.sh          (scripts/device_bg.sh start WAIT plan_s11b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh burst roofline model
else
  OVERHEAD_WORKLOADS=torch OVERHEAD_REPS=15 OVERHEAD_LIMIT=900 OUT="$OUT" scripts/device.sh burst overhead
fi
