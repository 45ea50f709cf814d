#!/usr/bin/env bash
# Session 3, call D: does duty-cycled tracing with CUPTI detached attribute a long launch-bound
# program as full tracing does (52 s program, traced 0.9 s of every 6 s)?
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3d"; mkdir -p "$R"
timeout 450 python3 benchmarks/validate_duty.py "$R/$G/run/duty-detach-long" --reps 1 --calls 10000000 \
  --duty 0.9/6 --duty-modes detach > "$R/duty-long.log" 2>&1
echo "rc=$?"; tail -n 30 "$R/duty-long.log"; cp "$R/duty-long.log" "$R/$G/run/duty-detach-long/validate_duty.log"
rm -rf "$R"/$G/run/duty-detach-long/*/raw "$R"/$G/run/duty-detach-long/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s3d.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
