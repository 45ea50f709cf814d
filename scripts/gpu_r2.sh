#!/usr/bin/env bash
# Real run 2: the full characterization suite (the shipped dataset).
set -u
. scripts/gpu_env.sh
G="${GPU_TAG:-h100}"; R="$OUT/r2"; mkdir -p "$R"
echo "=== characterize"; t0=$(date +%s)
timeout 590 python3 -m archline characterize -o "$R/$G/characterize" > "$R/characterize.log" 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s"
tail -n 40 "$R/characterize.log"
tar -C "$R" -czf "$OUT/r2.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
