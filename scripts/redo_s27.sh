#!/usr/bin/env bash
# Post hoc and planned redos of session 27, on a CPU. Needs the traces (scripts/restore_traces.sh). Prints
# docs/data/redo_s27.txt.
#   1. plan_s27a's 30 s trace (GPU-f926ffcb) and plan_s27b's 90 s trace (GPU-7c0faf81), each redone with the board's own
#      sensor calibration (as run) and with the shipped prior (GPU-591bd772's), at full length and cut (the first 12 s
#      of training for plan_s27a, the first 30 s for plan_s27b): benchmarks/redo_attribution.py --sensor-profiles.
#      plan_s27c's 12 s trace (GPU-6aeea0ea, batch 16) with its own, the shipped H100 and the shipped H200 prior; and
#      the same plan run again on an H200 (GPU-0335b9e0) with its own and the shipped H200 prior.
#   2. plan_s26a's 120 s trace (GPU-21b1215f), its first 30 s: the buffer's readings filtered before the fit (AR
#      whitening; a notch at 23-24.9 Hz), post hoc: benchmarks/redo_attribution.py --buffer-filter.
#   3. The alternation of the buffer's readings from one to the next, busy against idle, on every shipped recording:
#      benchmarks/buffer_residuals.py --alternation.
#   scripts/redo_s27.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shipped=results/h100/sensor/calibration/profiles.json
pick='^cut:|^buffer model|^== |identifiable:|kernel powers fitted|PASS/FAIL.*(±15|top-10)|replay priors \('
for spec in own-sensor-GPU-f926ffcb:18 own-sensor-90s-GPU-7c0faf81:60; do
  name=${spec%%:*}; cut=${spec##*:}
  src=results/h100/attribution-s27/$name
  cp -r "$src" "$tmp/$name"
  trace=$(ls "$tmp/$name"/transformer-run/raw/cupti/*.bin.xz)
  "$py" benchmarks/redo_attribution.py "$tmp/$name/transformer-run" --cupti "$trace" >/dev/null  # rebuild activities once
  for prof in "$src/sensor-calibration/profiles.json" "$shipped"; do
    for c in 0 "$cut"; do
      echo "=== $src, sensor model from $prof, the program's last $c s dropped (redo_attribution.py --sensor-profiles … --cut-s $c)"
      "$py" benchmarks/redo_attribution.py "$tmp/$name/transformer-run" --prior-replay "$tmp/$name/transformer-replay" \
        --sensor-profiles "$prof" --cut-s "$c" 2>&1 | grep -E "$pick" | sed "s|$tmp/||g"
    done
  done
done
# plan_s27c: planned for an H200, lent an H100 (GPU-6aeea0ea). The plan named the shipped H200 prior; on this board
# archline run would take the shipped Hopper (H100) prior, so both are shown beside the board's own.
name=own-sensor-b16-GPU-6aeea0ea
src=results/h100/attribution-s27/$name
cp -r "$src" "$tmp/$name"
"$py" benchmarks/redo_attribution.py "$tmp/$name/transformer-run" --cupti "$tmp/$name"/transformer-run/raw/cupti/*.bin.xz >/dev/null
for prof in "$src/sensor-calibration/profiles.json" "$shipped" results/h200/sensor/calibration/profiles.json; do
  echo "=== $src, sensor model from $prof (redo_attribution.py --sensor-profiles …)"
  "$py" benchmarks/redo_attribution.py "$tmp/$name/transformer-run" --prior-replay "$tmp/$name/transformer-replay" \
    --sensor-profiles "$prof" 2>&1 | grep -E "$pick" | sed "s|$tmp/||g"
done
# plan_s27c run again on an H200 (GPU-0335b9e0), as planned: its own calibration and the shipped H200 prior.
name=own-sensor-b16-GPU-0335b9e0
src=results/h200/attribution-s27/$name
cp -r "$src" "$tmp/h200-$name"
"$py" benchmarks/redo_attribution.py "$tmp/h200-$name/transformer-run" --cupti "$tmp/h200-$name"/transformer-run/raw/cupti/*.bin.xz >/dev/null
for prof in "$src/sensor-calibration/profiles.json" results/h200/sensor/calibration/profiles.json; do
  echo "=== $src, sensor model from $prof (redo_attribution.py --sensor-profiles …)"
  "$py" benchmarks/redo_attribution.py "$tmp/h200-$name/transformer-run" --prior-replay "$tmp/h200-$name/transformer-replay" \
    --sensor-profiles "$prof" 2>&1 | grep -E "$pick" | sed "s|$tmp/||g"
done
s26=results/h100/attribution-s26/long120-GPU-21b1215f
cp -r "$s26" "$tmp/s26"
"$py" benchmarks/redo_attribution.py "$tmp/s26/transformer-run" --cupti "$tmp"/s26/transformer-run/raw/cupti/*.bin.xz >/dev/null
for f in none ar notch; do
  echo "=== $s26, its first 30 s (the last 90 s dropped), buffer filter $f (redo_attribution.py --cut-s 90 --buffer-filter $f)"
  args=(); [ "$f" = none ] || args=(--buffer-filter "$f")
  "$py" benchmarks/redo_attribution.py "$tmp/s26/transformer-run" --prior-replay "$tmp/s26/transformer-replay" --cut-s 90 \
    "${args[@]}" 2>&1 | grep -E "$pick|^buffer filter" | sort -u | sed "s|$tmp/||g"
done
echo "=== every shipped recording: benchmarks/buffer_residuals.py --alternation results"
"$py" benchmarks/buffer_residuals.py --alternation results
