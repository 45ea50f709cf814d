#!/usr/bin/env bash
# Session 30's figures from its shipped runs, on a CPU (no fit redone). Prints docs/data/attribution_s30.txt.
#   plan_s30a (H200 GPU-0496e08b): the d = 2048 transformer (transformer2k) on an H200;
#   plan_s30b (H100 GPU-5814e373) and plan_s30c (asked for an H200, lent H100 GPU-964cc302): VGG-16's groups walked
#   alone with the memsets only and with the workspace set-up kernels kept on, then VGG-16's attribution (vgg16cl).
#   scripts/redo_s30.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
s30=results/h100/attribution-s30
sets="results/h200/attribution-s30/transformer2k-GPU-0496e08b $s30/vgg16cl-GPU-5814e373 $s30/vgg16cl-heldout-GPU-964cc302"
w=results/h100/bench/replay-probe
echo "== replay_probe.py --table"
$py benchmarks/replay_probe.py --table $w/walk-vgg16cl-memsets-GPU-5814e373.json $w/walk-vgg16cl-GPU-5814e373.json \
  $w/walk-vgg16cl-memsets-GPU-964cc302.json $w/walk-vgg16cl-GPU-964cc302.json
scripts/redo_tables.sh $sets
