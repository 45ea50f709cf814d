#!/usr/bin/env bash
# Session 31, on a CPU: benchmarks/design_power.py and benchmarks/design_ceiling.py over every shipped attribution run
# set of sessions 9-30 that can be read (one whose summary names a workload without its run directory is named on
# stderr and left out). Prints docs/data/design_power_all_s31.txt.
#   scripts/design_ceiling_all.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
sets=()
for d in results/h*/attribution-s*/*/; do
  d=${d%/}
  [ -f "$d/summary.json" ] || continue
  if ! out=$("$py" benchmarks/design_power.py "$d" 2>&1); then echo "left out: $d (${out##*$'\n'})" >&2; continue; fi
  sets+=("$d")
done
echo "== design_power.py"
"$py" benchmarks/design_power.py "${sets[@]}"
echo "== design_ceiling.py"
"$py" benchmarks/design_ceiling.py "${sets[@]}"
