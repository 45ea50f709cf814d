#!/usr/bin/env bash
# Session 10's last call. On an H200: issue 15's roofline run and the frozen model's scores. On any other board:
# graph replay's run-to-run reproducibility of both training steps with the defaults since session 9 (state restored,
# primed, every buffer its own; session 6's figures were of NaN weights): 2 runs each, top 5, marginals.
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then
  ROOFLINE_LIMIT=900 OUT="$OUT" scripts/device.sh roofline model
else
  REPLAY_LIMIT=780 REPLAY_BUDGET_S=740 OUT="$OUT" scripts/device.sh replay
fi
