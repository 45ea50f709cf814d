#!/usr/bin/env bash
# Session 23, frozen in the commit that added it, before it ran. One GPU (ask nvidia-h100-x1: H100 GPU-80bea713 is
# where a transformer pair failed unexplained in session 22): the fixed cost's allocation in its reviewed form
# (measurements centred in each pass, each kept in replay.json's fixed_passes_j; docs/replay.md "Session 23"), held out:
#   1. the transformer's graph replay in two separate processes, 3 s a configuration, three passes each (plan_s23a's
#      and plan_s23b's settings), then benchmarks/replay_across.py against 3 %;
#   2. ResNet-50's pair at plan_s18b's settings (1 s, one pass).
# About 6 minutes. Run detached (scripts/device_bg.sh start 570 plan_s23c). Locally: scripts/slim_tree.sh out first,
# back after. The transformer's archives come back as all-*-transformer, ResNet-50's as all-*.
#   OUT=/dir scripts/plan_s23c.sh
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "$0")/.." || exit 1
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode --format=csv,noheader
mkdir -p "$OUT/all"
REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 REPLAY_ARGS="--replay-s 3 --repeats 3" \
  OUT="$OUT/all" scripts/device.sh across
for f in "$OUT"/all/*-across.tar.gz; do [ -f "$f" ] && mv "$f" "${f%.tar.gz}-transformer.tar.gz"; done
SKIP_INSTALL=1 REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=150 REPLAY_LIMIT=260 OUT="$OUT/all" scripts/device.sh across
