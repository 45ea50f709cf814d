#!/usr/bin/env bash
# Session 16: the transformer's attribution on the H200 that ran plan_s16a (warm, archline already installed), held
# out: every rule as committed at the end of session 15, design budget 250 s as in plan_s15b. The links model has
# never been held out on an H200.
#
#   OUT=/dir scripts/plan_s16b.sh          (scripts/device_bg.sh start WAIT plan_s16b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 ATTRIBUTION_ARGS="--only transformer --design-budget-s 250" \
  OUT="$OUT" scripts/device.sh attribution
