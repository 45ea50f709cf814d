#!/usr/bin/env bash
# Session 3, call A (H100): duty-cycled tracing with CUPTI detached between traced periods.
# A smoke run (does detach/attach work, what does it cost per switch), then the overhead of
# full, detach-mode and disable-mode duty cycles on a launch-bound program, alternating reps.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s3a"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n ${TAILN:-16} "$R/$name.log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,persistence_mode,temperature.gpu --format=csv
step smoke 90 python3 -m archline run --json --force -o "$R/$G/run/duty-detach-smoke" --tracer inject \
  --trace-duty 0.2/1 -- python3 benchmarks/workload_launch_bound.py 600000
python3 - "$R/$G/run/duty-detach-smoke" <<'PY' || true
import json, sys
from archline.hw.cupti.inject import read_injection_output
from pathlib import Path
d = Path(sys.argv[1]) / "raw" / "cupti"
t = read_injection_output(d)
print("records", len(t.records), "errors", t.errors, "dropped", t.dropped, "traced", len(t.traced or []))
print("switch ms", [round(1e3 * s, 2) for s in t.switch_s])
print("finalize ms", [round(1e3 * s, 2) for s in t.detach_s])
print("detach wait ms", [round(1e3 * s, 2) for s in t.detach_wait_s])
print("clock", t.clocks[0].to_json() if t.clocks else None)
PY
TAILN=40 step duty 430 python3 benchmarks/validate_duty.py "$R/$G/run/duty-detach-check" --reps 3 --calls 2000000 \
  --duty 0.3/3 --duty-modes detach,disable
rm -rf "$R"/$G/run/duty-detach-check/*/raw "$R"/$G/run/*/*/trace.perfetto.json "$R"/$G/run/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s3a.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
