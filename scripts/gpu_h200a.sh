#!/usr/bin/env bash
# H200 run A: sensor calibration, then the full characterization suite.
set -u
. scripts/gpu_env.sh
G=h200; R="$OUT/h200a"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 6 "$R/$name.log"; }
step calibrate 100 python3 -m archline sensor calibrate -o "$R/$G/sensor/calibration"
step characterize 420 python3 -m archline characterize -o "$R/$G/characterize"
tar -C "$R" -czf "$OUT/h200a.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
