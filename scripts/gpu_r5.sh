#!/usr/bin/env bash
# Real run 5: the full-GPU instruction table again (repeat agreement with run 4), then the one-thread shape.
# RUN1 = the first table's run directory, carried in the checkout.
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r5"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 6 "$R/$name.log"; }
step instructions_repeat 300 python3 -m archline instructions --shapes full --opt 3,0 --target-s 0.4 --no-techniques --repeat-of "$RUN1" -o "$R/$G/instructions-repeat"
step instructions_single 270 python3 -m archline instructions --shapes single --opt 3,0 --target-s 0.2 --no-techniques -o "$R/$G/instructions-single"
tar -C "$R" -czf "$OUT/r5.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
