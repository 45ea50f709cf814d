#!/usr/bin/env bash
# Session 9's call on one GPU: the attribution of real training loops with priors from a halves design now
# that every switched replay starts from the restored state (session 9's prefix-design run left ResNet-50's
# groups unresolved). Run twice in session 9: at 42fcd28 (unprimed) and at 81cace8, where replay primed every
# switched replay with a whole step by default; since b9e5154 priming is off unless asked for (--prime of
# benchmarks/validate_attribution_real.py). Raw CUPTI traces come back gzipped (large-*.gz).
#
#   OUT=/dir scripts/plan_s9.sh          (scripts/device_bg.sh start WAIT plan_s9 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
MAX_LARGE=2 ATTRIBUTION_LIMIT=1100 OUT="$OUT" scripts/device.sh attribution
