#!/usr/bin/env bash
# Session 2, call F (H100): the quick characterization with the energy roofline as a section of its report.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2f"; mkdir -p "$R"
timeout 470 python3 -m archline characterize --quick --roofline -o "$R/$G/characterize-quick-roofline" > "$R/characterize.log" 2>&1
echo "rc=$?"; tail -n 25 "$R/characterize.log"
rm -f "$R"/$G/characterize-quick-roofline/traces.npz.tmp
tar -C "$R" -czf "$OUT/s2f.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
