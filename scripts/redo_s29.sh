#!/usr/bin/env bash
# Session 29's figures from its shipped runs, on a CPU (no fit redone). Prints docs/data/attribution_s29.txt.
#   plan_s29a (H100 GPU-67dc1090) and plan_s29c (H100 GPU-3f969882): the transformer at d = 2048 (transformer2k),
#   beside session 22's d = 512 transformer at batch 128 on GPU-6e0448a4 (the best shipped share, 45.0 %).
#   scripts/redo_s29.sh
set -eu
cd "$(dirname "$0")/.."
s29=results/h100/attribution-s29
sets="$s29/transformer2k-GPU-67dc1090 $s29/transformer2k-heldout-GPU-3f969882 results/h100/attribution-s22/batch128-GPU-6e0448a4"
scripts/redo_tables.sh $sets
