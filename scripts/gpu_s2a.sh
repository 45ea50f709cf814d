#!/usr/bin/env bash
# Session 2, call A (H100): ncu counts of the held-out kernels, operand-data energy exploration,
# the CUPTI injection tracer on a real program, and the recording-overhead benchmark.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2a"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 14 "$R/$name.log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,persistence_mode --format=csv > "$R/state.csv"
step ncu_version 20 /usr/local/cuda/bin/ncu --version
step ncu_query 60 /usr/local/cuda/bin/ncu --query-metrics
step ncu_counts 240 python3 - <<PY
import json, sys
from archline.hw.ncu import count_workloads
from archline.characterize.workloads import default_workloads
names = [w.name for w in default_workloads()]
counts, metrics = count_workloads(names, keep="$R/ncu")
print("metrics:", metrics)
rows = [c.as_row() for c in counts.values()]
json.dump(rows, open("$R/ncu/counts.json", "w"), indent=1)
for r in rows: print(json.dumps(r))
PY
step explore 120 python3 scripts/explore_energy_terms.py
mv "$OUT/explore_energy_terms.json" "$R/" 2>/dev/null
step run_inject 90 python3 -m archline run --tracer inject -o "$R/$G/run/cupy-mix-inject" -- python3 benchmarks/workload_cupy_mix.py
step run_python 90 python3 -m archline run --tracer python -o "$R/$G/run/cupy-mix-python" -- python3 benchmarks/workload_cupy_mix.py
step overhead 200 python3 benchmarks/bench_run_overhead.py --reps 3 --out "$R/$G/bench/run-overhead"
tar -C "$R" -czf "$OUT/s2a.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
