#!/usr/bin/env bash
# Session 12: archline run's default tracing cost on the transformer training step, then on the GPT-2 decode loop,
# judged by the robust per-loop change committed before this run (bench_run_overhead.robust_loop_change).
#
#   OUT=/dir scripts/plan_s12c.sh          (scripts/device_bg.sh start WAIT plan_s12c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OVERHEAD_WORKLOADS=torch OVERHEAD_REPS=11 OVERHEAD_LIMIT=560 OUT="$OUT" scripts/device.sh overhead
mkdir -p "$OUT/all"
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=decode OVERHEAD_REPS=7 OVERHEAD_LIMIT=560 OUT="$OUT/all" scripts/device.sh overhead
