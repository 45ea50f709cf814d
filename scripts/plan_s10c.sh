#!/usr/bin/env bash
# Session 10's held-out call. On an H200: issue 15's roofline run and the frozen model's scores. On any other board:
# the attribution of both real training loops with the prior rule frozen on the first call's board (GPU-9abc3476):
# a replay prior above the power limit at the loop's call time is capped at the bound and widened by
# ln(prior / bound) instead of dropped (column_fit.cap_impossible_priors).
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=960 OUT="$OUT" scripts/device.sh roofline model
else
  MAX_LARGE=2 ATTRIBUTION_LIMIT=1150 OUT="$OUT" scripts/device.sh attribution
fi
