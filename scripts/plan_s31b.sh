#!/usr/bin/env bash
# Session 31, frozen with plan_s31a.sh (its header says why and the rule), before either ran: the second call on the
# same machine, archline as plan_s31a installed it. benchmarks/sensor_contention.py --copies 1 --launches 64, 480 s.
# About 9 minutes held.
#   OUT=/dir scripts/plan_s31b.sh
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/all"
SKIP_INSTALL=1 CONTENTION_SECONDS=480 CONTENTION_COPIES=1 CONTENTION_LAUNCHES=64 CONTENTION_LIMIT=540 \
  OUT="$OUT/all" scripts/device.sh contention
