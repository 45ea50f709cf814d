#!/usr/bin/env bash
# Session 31, post hoc on a CPU: six shipped real-program runs (scripts/split_by_length_s31.sh's) redone by
# benchmarks/redo_attribution.py with the buffer model's lag and delay sigma left out of the rows (--no-sensor-sigma,
# as they were run) and carried in (the default since session 31), through the board's own calibration where the run
# had one (sensor-calibration/profiles.json in its run set), else the shipped one of its generation (as
# redo_attribution.py takes it). Per run: the windows fitted, the share of kernel energy in identifiable rows within
# +-15 %, the energy-weighted median 95 % half-width, the top ten within 15 % of replay's isolated energy, both ways. Needs the traces (scripts/restore_traces.sh). Prints
# docs/data/sensor_sigma_s31.txt.
#   scripts/sensor_sigma_s31.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "run set / workload | fitted on | within ±15 % (without σ -> with) | median half-width | top ten within 15 %"
for pair in h100/attribution-s22/batch128-GPU-6e0448a4:transformer h100/attribution-s27/own-sensor-b16-GPU-6aeea0ea:transformer \
  h200/attribution-s21/heldout-time-rule-GPU-ecd6d00a:transformer h200/attribution-s23/batch16-GPU-ec88f4b4:transformer \
  h100/attribution-s29/transformer2k-GPU-67dc1090:transformer2k h200/attribution-s21/heldout-resnet50cl-GPU-ecd6d00a:resnet50cl; do
  set=results/${pair%%:*}; w=${pair##*:}
  rm -rf "$tmp/run"; cp -r "$set/$w-run" "$tmp/run"
  own=(); [ -f "$set/sensor-calibration/profiles.json" ] && own=(--sensor-profiles "$set/sensor-calibration/profiles.json")
  for how in without with; do
    flag=(); [ "$how" = without ] && flag=(--no-sensor-sigma)
    "$py" benchmarks/redo_attribution.py "$tmp/run" --cupti "$tmp"/run/raw/cupti/*.bin.xz --prior-replay "$set/$w-replay" \
      "${own[@]}" "${flag[@]}" --json 2>/dev/null | sed -n '/^{/,$p' >"$tmp/$how.json"
  done
  "$py" - "$set" "$w" "$tmp/without.json" "$tmp/with.json" <<'PY'
import json, sys
s, w, a, b = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
def f(k, x): return f"{100 * x[k]:.1f} %" if k.endswith("share") else f"{x[k]:.1f} %"
print(f"{s.split('/', 1)[1]} {w} | {a['fit_windows']} -> {b['fit_windows']} | "
      f"{f('identifiable_within_15pct_share', a)} -> {f('identifiable_within_15pct_share', b)} | "
      f"{f('median_half_width_pct', a)} -> {f('median_half_width_pct', b)} | "
      f"{a['top_within_15pct']} -> {b['top_within_15pct']} of {b['top_compared']}")
PY
done
