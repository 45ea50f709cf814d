#!/usr/bin/env bash
# Frozen in session 18 before it ran (after plan_s17a/b and the ResNet-50 busy attribution of the same session):
#  1. graph replay of ResNet-50 (channels_last) in two separate processes, then benchmarks/replay_across.py: each
#     group's isolated energy from one capture to the next (issue 13's 3 % from one run to the next, the CNN;
#     session 18's plan_s17a measured the transformer);
#  2. the default's tracing cost on the GPT-2 decode loop inside one process (overhead_interleaved.py, 10 s halves,
#     decode only, 150 s): a fourth H100 figure for the decode loop's tracing share;
#  3. the transformer's attribution with the links model, the default again since session 18 (design budget 250 s):
#     the same budget as plan_s17b's busy design, for the share within ±15 % and the top-10 with links.
# About 17 minutes on an H100.
#
#   OUT=/dir scripts/plan_s18b.sh          (scripts/device_bg.sh start WAIT plan_s18b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=150 REPLAY_LIMIT=260 OUT="$OUT" scripts/device.sh across
INTERLEAVED_WORKLOADS=decode INTERLEAVED_SECONDS=150 SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh interleaved
MAX_LARGE=1 ATTRIBUTION_LIMIT=560 ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250" \
  SKIP_INSTALL=1 OUT="$OUT/all2" scripts/device.sh attribution
