#!/usr/bin/env bash
# Session 28, frozen in the commit that added it, before it ran; on the two-GPU host plan_s28a held. A diagnosis, no
# verdict: plan_s28a found the decode loop's two concurrent copies slowing down independently (their speeds' correlation
# over 2 s bins, median 0.00) with no steal time. Where do the spells come from? benchmarks/loop_spells.py: one plain
# copy per GPU pinned to one CPU each (16 and 24), 60 s of loops with each loop's wall and main-thread CPU time, a
# pure-Python spin on CPU 8, nvidia-smi's SM clock and utilisation every 0.25 s. Nothing of archline's runs.
#   OUT=/dir scripts/plan_s28b.sh
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OUT"
timeout 200 python3 benchmarks/loop_spells.py --gpus 0,1 --cpus 16,24 --spin-cpu 8 --seconds 60 \
  --json "$OUT/loop_spells.json" 2>&1 | tee "$OUT/loop_spells.log"
nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.sm,clocks.mem,persistence_mode,temperature.gpu \
  --format=csv >"$OUT/nvidia-smi.csv" 2>&1
