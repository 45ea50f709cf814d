#!/usr/bin/env bash
# Session 28's figures from its shipped runs, on a CPU. Prints docs/data/overhead_concurrent_s28.txt.
#   1. plan_s28a (H100s GPU-0c50489b, GPU-2d47e4f9): the decode loop twice at once, one copy under archline run.
#   2. plan_s28b (H100s GPU-3c3176cd, GPU-dbb6c5cb): where the loop's slow spells come from (nothing of archline's).
#   3. plan_s28c (H100s GPU-9004449a, GPU-141f411d): as plan_s28a, judged per CPU speed (a spin around each loop).
#   scripts/redo_s28.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
d=results/h100/bench/overhead-concurrent-s28
$py benchmarks/overhead_concurrent.py --from-json "$d"/plan_s28a-*/overhead_concurrent.json || true
$py benchmarks/loop_spells.py --from-json "$d"/plan_s28b-*/loop_spells.json
$py benchmarks/overhead_concurrent.py --from-json "$d"/plan_s28c-*/overhead_concurrent.json || true
