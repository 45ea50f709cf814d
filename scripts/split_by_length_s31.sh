#!/usr/bin/env bash
# Session 31, post hoc on a CPU: benchmarks/split_by_length.py on six shipped real-program runs (transformers at d = 512
# on two H100s and two H200s, at d = 2048 on an H100; ResNet-50 in channels_last on an H200): each attributed as run
# and with its kernel names split by call length, through the board's own calibration where the run had one. Needs the traces (scripts/restore_traces.sh). Prints
# docs/data/split_by_length_s31.txt.
#   scripts/split_by_length_s31.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pair in h100/attribution-s22/batch128-GPU-6e0448a4:transformer h100/attribution-s27/own-sensor-b16-GPU-6aeea0ea:transformer \
  h200/attribution-s21/heldout-time-rule-GPU-ecd6d00a:transformer h200/attribution-s23/batch16-GPU-ec88f4b4:transformer \
  h100/attribution-s29/transformer2k-GPU-67dc1090:transformer2k h200/attribution-s21/heldout-resnet50cl-GPU-ecd6d00a:resnet50cl; do
  set=results/${pair%%:*}; w=${pair##*:}
  echo "== $set $w"
  rm -rf "$tmp/run"; cp -r "$set/$w-run" "$tmp/run"
  own=(); [ -f "$set/sensor-calibration/profiles.json" ] && own=(--sensor-profiles "$set/sensor-calibration/profiles.json")
  "$py" benchmarks/split_by_length.py "$tmp/run" "$set/$w-replay" --cupti "$tmp"/run/raw/cupti/*.bin.xz "${own[@]}" 2>/dev/null | grep -v '^rebuilt'
done
