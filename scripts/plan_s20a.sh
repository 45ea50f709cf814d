#!/usr/bin/env bash
# Prepared in session 19 for a later device session (frozen in the commit that added it; not yet run): would a
# design four times as long bring the transformer's rows within ±15 %? On the shipped H100 designs the in-step
# intervals of the mid-sized groups are mostly the design's regression σ (≈ 2 σ_config / √N), which a longer design
# narrows, while the neighbour dependence ρ folded into every group does not narrow (docs/attribution.md,
# "Session 15": the budget curve up to 117 configurations; "Session 19": τ is not a drift worth taking out).
# No rule changes: the default attribution with the links model, only the design's size and budget:
#   the transformer's attribution, --design 320 --design-budget-s 1150 (320 configurations and 80 replicates: 400
#   measurements of 2.5-2.7 s on the shipped H100 designs, 1000-1090 s; a smaller budget would silently shrink the
#   design), then benchmarks/design_table.py and top10_table.py on it as on sessions 14-18's runs.
# Judged by issue 13's rule as before: the share of kernel energy in identifiable rows within ±15 % (95 %), and the
# top ten against graph replay's isolated energies. About 22 minutes on an H100 (run it detached: device_bg.sh).
#
#   OUT=/dir scripts/plan_s20a.sh          (scripts/device_bg.sh start WAIT plan_s20a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=1500 ATTRIBUTION_ARGS="--only transformer --design 320 --design-budget-s 1150" \
  OUT="$OUT" scripts/device.sh attribution
