#!/usr/bin/env bash
# Session 12: archline run's default tracing cost on the transformer training step, then on the GPT-2 decode loop,
# judged by the robust per-loop change committed before this run (bench_run_overhead.robust_loop_change).
# On an H200 it runs issue 15's out-of-sample roofline run instead (roofline, then the model's scores).
#
#   OUT=/dir scripts/plan_s12c.sh          (scripts/device_bg.sh start WAIT plan_s12c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh roofline model
  exit
fi
OVERHEAD_WORKLOADS=torch OVERHEAD_REPS=11 OVERHEAD_LIMIT=560 OUT="$OUT" scripts/device.sh overhead
mkdir -p "$OUT/all"
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=decode OVERHEAD_REPS=7 OVERHEAD_LIMIT=560 OUT="$OUT/all" scripts/device.sh overhead
