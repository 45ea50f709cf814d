#!/usr/bin/env bash
# Real run 4: the full-GPU instruction table at -O3 and -O0, with the techniques compared.
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r4"; mkdir -p "$R"
echo "=== instructions"; t0=$(date +%s)
timeout 560 python3 -m archline instructions --shapes full --opt 3,0 --target-s 0.4 -o "$R/$G/instructions" > "$R/instructions.log" 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s"
tail -n 20 "$R/instructions.log"
tar -C "$R" -czf "$OUT/r4.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
