#!/usr/bin/env bash
# Session 10's experiment: the transformer's attribution with a step long enough for the power buffer's 20 ms windows
# to see its phases (batch 128 of 512-token sequences, about 8x the 5.4 ms step at batch 16), replay's defaults and
# the capped priors of 8c3fdb2. Does the data then inform rows the priors alone cannot narrow?
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
MAX_LARGE=1 ATTRIBUTION_LIMIT=720 ATTRIBUTION_ARGS="--only transformer --transformer-batch 128" OUT="$OUT" \
  scripts/device.sh attribution
