#!/usr/bin/env bash
# Session 15: the sensors' share of the default's cost, measured with 2 s sensor halves instead of 10 s (frozen in the
# commit that added this script). Why: in session 13's runs the decode loop's time per loop switched between ~290
# and ~480 ms in episodes of 5-10 s (results/h100/bench/overhead-interleaved-s13/overhead_interleaved-GPU-cbb21413.json,
# its loops), so 10 s halves compared one episode with another; 2 s halves put each on/off pair inside one episode
# more often. Everything else as benchmarks/overhead_interleaved.py judges it (Hodges-Lehmann over the cycles,
# signed-rank interval; the tracing share as before), both workloads, 120 s blocks.
#
#   OUT=/dir scripts/plan_s15c.sh          (scripts/device_bg.sh start WAIT plan_s15c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
INTERLEAVED_SECONDS=120 INTERLEAVED_TOGGLE_S=2 OUT="$OUT" scripts/device.sh interleaved
