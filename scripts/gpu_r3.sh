#!/usr/bin/env bash
# Real run 3: the energy roofline and the single-thread instruction table.
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r3"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 14 "$R/$name.log"; }
step roofline 300 python3 -m archline roofline -o "$R/$G/roofline"
[ "${WITH_SINGLE:-1}" = 1 ] && step instructions_single 270 python3 -m archline instructions --shapes single --opt 3,0 --target-s 0.2 --no-techniques -o "$R/$G/instructions-single"
tar -C "$R" -czf "$OUT/r3.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
