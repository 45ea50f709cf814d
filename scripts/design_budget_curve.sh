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
tmp=$(mktemp -d)
printf '%-14s %6s %6s %8s %10s %8s\n' board first cfgs "±15 %" "half-w %" "top-10"
for S in "$@"; do
  board=${S##*-GPU-}; gpu=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); L=results/${gpu:-h100}/bench/attribution-real
  total=$("$py" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['design']['configs']))" "$S/transformer-replay/replay.json")
  for n in $ns; do
    [ "$n" -le "$total" ] || continue
    r="$tmp/$board-$n-replay"; w="$tmp/$board-$n-run"; log="$L/budget-s15-$board-first$n.log"
    cp -r "$S/transformer-run" "$w"
    { echo "# scripts/design_budget_curve.sh at $(git describe --always --dirty): refold_replay.py --first $n --model links, then redo_attribution.py"
      "$py" benchmarks/refold_replay.py "$S/transformer-replay" "$r" --first "$n" --model links
      "$py" benchmarks/redo_attribution.py "$w" --cupti "$w"/raw/cupti/*.bin.xz --prior-replay "$r"; } >"$log" 2>&1
    share=$(sed -n 's/.*identifiable with ±15 % intervals: \([0-9.]*\) %.*/\1/p' "$log")
    half=$(sed -n 's/.*energy-weighted median 95 % half-width \([0-9.]*\) %.*/\1/p' "$log")
    top=$(sed -n 's/.*top-10 vs replay: \([0-9]* of [0-9]*\) within.*/\1/p' "$log")
    printf '%-14s %6s %6s %8s %10s %8s\n' "GPU-$board" "$n" "$total" "${share:-?}" "${half:-?}" "${top:-?}"
  done
done
rm -rf "$tmp"
