#!/usr/bin/env bash
# Check the CUPTI tracers on a GPU: the default (auto → injection) and in-process, and their overhead.
set -u
. scripts/gpu_env.sh
R="$OUT/tracer"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 14 "$R/$name.log"; }
step run_auto 60 python3 -m archline run -o "$R/h200/run/cupy-mix-inject" -- python3 benchmarks/workload_cupy_mix.py
step run_python 60 python3 -m archline run --tracer python -o "$R/h200/run/cupy-mix-python" -- python3 benchmarks/workload_cupy_mix.py
step overhead 150 python3 benchmarks/bench_run_overhead.py --reps 3 --out "$R/h200/bench/run-overhead"
tar -C "$R" -czf "$OUT/tracer.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
