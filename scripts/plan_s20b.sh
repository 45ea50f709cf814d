#!/usr/bin/env bash
# Prepared in session 20 for the rest of its device time (frozen in the commit that added it; run after plan_s20a):
# issue 13's "reproducible within 3 % from one run to the next" has been shown for graph replay's five largest groups
# on three H100s only (docs/data/replay_across_s19.txt). Asked for an H200:
#  1. the GPU tests;
#  2. the transformer's replay in two separate processes, then benchmarks/replay_across.py (the five largest groups
#     by CUPTI busy time, as plan_s19a), 120 s a process instead of 150 s to fit about 9 minutes in all.
# Judged as session 19's: each group's spread between the two processes against 3 %.
#
#   OUT=/dir scripts/plan_s20b.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=transformer REPLAY_BUDGET_S=120 REPLAY_LIMIT=170 OUT="$OUT" scripts/device.sh gputest across
