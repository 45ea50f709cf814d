#!/usr/bin/env bash
# Real run 1: sensor calibration and validation, the quick suite, and per-kernel attribution.
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r1"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 8 "$R/$name.log"; }
step calibrate 120 python3 -m archline sensor calibrate -o "$R/$G/sensor/calibration"
step validate 150 python3 -m archline sensor validate -o "$R/$G/sensor/validation"
step quick 120 python3 -m archline characterize --quick -o "$R/$G/characterize-quick"
step run_cupy 90 python3 -m archline run -o "$R/$G/run/cupy-mix" -- python3 benchmarks/workload_cupy_mix.py
step validate_attr 150 python3 benchmarks/validate_attribution.py --quick "$R/$G/run/validation"
step overhead 120 python3 benchmarks/bench_run_overhead.py
step sampler 120 python3 benchmarks/bench_sampler.py --out "$R/$G/bench/sampler.json"
tar -C "$R" -czf "$OUT/r1.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
