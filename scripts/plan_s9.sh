#!/usr/bin/env bash
# Session 9's call on one GPU: the attribution of real training loops with priors from a halves design now
# that every switched replay starts from the restored state (session 9's prefix-design run left ResNet-50's
# groups unresolved), and (second run) from buffers a whole step filled (replay's prime, the library's default
# since 42fcd28's successor). Raw CUPTI traces come back gzipped (large-*.gz).
#
#   OUT=/dir scripts/plan_s9.sh          (scripts/device_bg.sh start WAIT plan_s9 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
MAX_LARGE=2 ATTRIBUTION_LIMIT=1100 OUT="$OUT" scripts/device.sh attribution
