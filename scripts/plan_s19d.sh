#!/usr/bin/env bash
# Frozen in session 19 before it ran: the transformer's attribution with the default rules (links design model,
# design budget 250 s, as plan_s18b's third step), on whatever board comes (an H200 asked for): one more held-out
# figure for issue 13's share within ±15 % and the top ten, and the first run whose prior-led rows say what their
# prior's σ is made of (column_fit.PriorParts, session 19). About 8 minutes.
#
#   OUT=/dir scripts/plan_s19d.sh          (scripts/device_bg.sh start WAIT plan_s19d runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=560 ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250" \
  OUT="$OUT" scripts/device.sh attribution
