#!/usr/bin/env bash
# Session 2, call B: the energy roofline with the counted model (component microbenchmarks + ncu counts
# of the held-out kernels), then the sensor validation with the host-clock load driver.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2b"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 8 "$R/$name.log"; }
step roofline 420 python3 -m archline roofline -o "$R/$G/roofline"
grep -A 16 "counted prediction" "$R/$G/roofline/roofline.md" | tail -14
step validate ${VALIDATE_S:-130} python3 -m archline sensor validate -o "$R/$G/sensor/validation"
tar -C "$R" -czf "$OUT/s2b.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
