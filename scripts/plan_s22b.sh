#!/usr/bin/env bash
# Prepared in session 21 for a later device session (frozen in the commit that added it; not yet run). Does a step as
# long as real training steps are narrow the intervals? The transformer's step at batch 16 lasts about 4-5 ms,
# shorter than the power buffer's 20 ms readings and its 13 ms lag, so the windows cannot see its phases (every
# shipped transformer row is "dominated by: prior"), and what holds the share within ±15 % down is the design's
# neighbour dependence (rho_f 3.5-4 % on session 21's H200s; design_power.py: 80 % needs at most 1.1-1.6 %). At
# batch 128 (a 34.6 ms step on an H100, session 10's plan_s10e, run then under rules since replaced) the phases span
# the readings, and larger kernels may depend less on what their neighbours leave in the L2. On one board, no rule
# changed (session 20's time rule, links model, 250 s design):
#   1. the transformer at batch 16, as plan_s21a's first step (the board's own reference);
#   2. the same at batch 128.
# Compared by benchmarks/design_table.py, top10_table.py, time_parts.py and design_power.py on the two run sets: the
# share within ±15 %, the half-widths, what dominated the rows, rho_f. About 14 minutes on an H200 (session 21's
# transformer attributions took 6 minutes at batch 16): run it detached (scripts/device_bg.sh start 580 plan_s22b,
# then wait). Locally: scripts/slim_tree.sh out first, back after. Archives come back as results-*/logs-* (batch 16)
# and all-* (batch 128): ingest each with scripts/ingest_attribution.sh (ARCHIVE . for the first, all for the second).
#   OUT=/dir scripts/plan_s22b.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=560 ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250" \
  OUT="$OUT" scripts/device.sh attribution
MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128" \
  SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh attribution
