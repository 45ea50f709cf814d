#!/usr/bin/env bash
# How much of each run's busy time its board spent at the power limit (session 30), for the run sets of sessions 22-30
# whose raw CUPTI traces are in the history (scripts/restore_traces.sh first). Prints docs/data/at_limit_s30.txt.
# About a minute a run on a CPU (each trace is read again).
#   scripts/at_limit_s30.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
sets=()
for s in results/h100/attribution-s22 results/h200/attribution-s23 results/h200/attribution-s24 \
  results/h100/attribution-s25/model-priors-GPU-861b3378 results/h100/attribution-s25/model-priors-GPU-974e716a \
  results/h100/attribution-s26/long120-GPU-21b1215f results/h100/attribution-s27 results/h200/attribution-s27 \
  results/h100/attribution-s29/transformer2k-GPU-67dc1090 results/h100/attribution-s29/transformer2k-heldout-GPU-3f969882 \
  results/h200/attribution-s30 results/h100/attribution-s30; do
  if [ -f "$s/summary.json" ]; then sets+=("$s"); else for d in "$s"/*/; do sets+=("${d%/}"); done; fi
done
$py benchmarks/at_limit_table.py "${sets[@]}"
