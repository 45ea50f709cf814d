#!/usr/bin/env bash
# What a smaller design would have given (session 15, post hoc): each set's transformer design refitted from its first N
# configurations (benchmarks/refold_replay.py --first N --model links), then the attribution redone from the run's
# shipped trace with those priors (benchmarks/redo_attribution.py). One log per set and N under
# results/<gpu>/bench/attribution-real/budget-s15-<board>-first<N>.log, and a line per redo on stdout:
#
#   scripts/restore_traces.sh && scripts/design_budget_curve.sh "50 60 80 100 117" SET_DIR... > docs/data/design_budget_s15.txt
set -eu
ns=${1:?the configuration counts}; shift
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
# shellcheck source=scripts/redo_common.sh
. scripts/redo_common.sh
tmp=$(mktemp -d)
printf '%-14s %6s %6s %8s %10s %8s\n' board first cfgs "±15 %" "half-w %" "top-10"
for S in "$@"; do
  board=${S##*-GPU-}; gpu=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); L=results/${gpu:-h100}/bench/attribution-real
  total=$("$py" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['design']['configs']))" "$S/transformer-replay/replay.json")
  for n in $ns; do
    [ "$n" -le "$total" ] || continue
    log="$L/budget-s15-$board-first$n.log"
    refold_redo "$log" "$S" "$tmp/$board-$n" scripts/design_budget_curve.sh --first "$n" --model links
    printf '%-14s %6s %6s %8s %10s %8s\n' "GPU-$board" "$n" "$total" "$redo_share" "$redo_half" "$redo_top"
  done
done
rm -rf "$tmp"
