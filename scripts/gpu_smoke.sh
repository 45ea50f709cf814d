#!/usr/bin/env bash
# One short pass over every GPU code path, to find bugs before the long runs. Writes under $OUT.
set -u
. scripts/gpu_env.sh
R="$OUT/runs"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 15 "$R/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm,temperature.gpu --format=csv
step version 30 python3 -m archline --version
step calibrate 90 python3 -m archline sensor calibrate --quick -o "$R/cal"
step validate 90 python3 -m archline sensor validate --quick -o "$R/val"
step characterize 150 python3 -m archline characterize --quick --target-s 0.2 -o "$R/char"
step instructions 120 python3 -m archline instructions --only add.u32 --only fma.f32 --only div.rn.f32 --opt 3,0 --target-s 0.2 -o "$R/inst"
step roofline 150 python3 -m archline roofline --target-s 0.2 --heldout-error 0.1 -o "$R/roof"
step run 90 python3 -m archline run -o "$R/run" -- python3 benchmarks/workload_cupy_mix.py
step measure 30 python3 -m archline measure --json -- sleep 1
step pytest_gpu 120 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider
tar -C "$OUT" -czf "$OUT/smoke.tar.gz" runs && rm -rf "$R"
ls -la "$OUT"
