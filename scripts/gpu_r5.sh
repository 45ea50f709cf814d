#!/usr/bin/env bash
# Real run 5: the full-GPU instruction table again, for the repeat agreement with run 4.
# RUN1 = the first table's run directory, carried into the checkout.
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r5"; mkdir -p "$R"
echo "=== instructions repeat"; t0=$(date +%s)
timeout 560 python3 -m archline instructions --shapes full --opt 3,0 --target-s 0.4 --no-techniques --repeat-of "$RUN1" -o "$R/$G/instructions-repeat" > "$R/instructions.log" 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s"
tail -n 20 "$R/instructions.log"
tar -C "$R" -czf "$OUT/r5.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
