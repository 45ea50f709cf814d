#!/usr/bin/env bash
# Session 13's last call, on whatever single GPU comes: the default's cost inside one process
# (benchmarks/overhead_interleaved.py) with each traced period taken GUARD_S = 0.5 s longer on both sides, the rule
# added after review of session 13's first two runs (82e5ec7) and committed before this one: its held-out run.
#
#   OUT=/dir scripts/plan_s13a.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
INTERLEAVED_SECONDS=${INTERLEAVED_SECONDS:-120} OUT="$OUT" scripts/device.sh interleaved
