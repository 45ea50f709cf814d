#!/usr/bin/env bash
# H200 run B: the energy roofline, then the sensor validation.
set -u
. scripts/gpu_env.sh
G=h200; R="$OUT/h200b"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 6 "$R/$name.log"; }
step roofline 240 python3 -m archline roofline -o "$R/$G/roofline"
step validate 120 python3 -m archline sensor validate -o "$R/$G/sensor/validation"
tar -C "$R" -czf "$OUT/h200b.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
