#!/usr/bin/env bash
# Post hoc (session 26), on a CPU: session 22's batch-128 run on GPU-e7ad0b8d cut shorter (what suggested plan_s26a), then
# plan_s26a's 120 s transformer run redone from its raw trace at the frozen 12 s cut
# (its board's own reference at the earlier length) and at two more lengths, then the power buffer's residuals
# (benchmarks/buffer_residuals.py) on it and on session 22's two batch-128 runs. Needs the traces
# (scripts/restore_traces.sh). Prints docs/data/redo_s26.txt.
#   scripts/redo_s26.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
s22=results/h100/attribution-s22/batch128-GPU-e7ad0b8d
cp -r "$s22" "$tmp/s22"
for cut in 0 3 6 9; do  # what suggested the plan: session 22's 12 s of training, cut shorter
  echo "=== $s22, the program's last $cut s dropped (benchmarks/redo_attribution.py --cut-s $cut)"
  args=(); [ "$cut" = 0 ] && args=(--cupti "$tmp"/s22/transformer-run/raw/cupti/*.bin.xz)
  "$py" benchmarks/redo_attribution.py "$tmp/s22/transformer-run" "${args[@]}" --prior-replay "$tmp/s22/transformer-replay" \
    --cut-s "$cut" 2>&1 | grep -E '^cut:|^== |identifiable:'
done
s26=results/h100/attribution-s26/long120-GPU-21b1215f
cp -r "$s26" "$tmp/s26"
trace=$(ls "$tmp"/s26/transformer-run/raw/cupti/*.bin.xz)
for cut in 0 60 90 108; do
  echo "=== $s26, the program's last $cut s dropped (benchmarks/redo_attribution.py --cut-s $cut)"
  args=(); [ "$cut" = 0 ] && args=(--cupti "$trace")
  "$py" benchmarks/redo_attribution.py "$tmp/s26/transformer-run" "${args[@]}" --prior-replay "$tmp/s26/transformer-replay" \
    --cut-s "$cut" 2>&1 | grep -E '^cut:|^== |identifiable:|kernel powers fitted|PASS/FAIL.*(±15|top-10)'
done
echo "=== $s26: benchmarks/buffer_residuals.py"
"$py" benchmarks/buffer_residuals.py "$tmp/s26/transformer-run"
echo "=== $s26, its first 30 s (the last 90 s dropped): benchmarks/buffer_residuals.py --cut-s 90 --scan"
"$py" benchmarks/buffer_residuals.py "$tmp/s26/transformer-run" --cut-s 90 --scan
for r in batch128-GPU-e7ad0b8d batch128-GPU-6e0448a4; do
  d=results/h100/attribution-s22/$r
  cp -r "$d/transformer-run" "$tmp/$r"
  echo "=== $d: benchmarks/buffer_residuals.py"
  "$py" benchmarks/buffer_residuals.py "$tmp/$r" --cupti "$tmp/$r"/raw/cupti/*.bin.xz | grep -v '^rebuilt'
done
