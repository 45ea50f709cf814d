#!/usr/bin/env bash
# Session 3, call F: as call E at 5 % duty (0.3 s of every 6 s), blocks of at least 12 s; duty only (CUPTI
# detached between traced periods) against no recording, modes rotating per repetition.
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3f"; mkdir -p "$R/$G/bench"
nvidia-smi --query-gpu=name,clocks.sm,power.limit,persistence_mode,temperature.gpu --format=csv,noheader
timeout 470 python3 benchmarks/bench_run_overhead.py --workloads small,launch,torch --modes duty \
  --reps 4 --min-block-s 12 --duty 0.3/6 --duty-mode detach --out "$R/runs" > "$R/$G/bench/run-overhead-duty5.txt" 2>&1
echo "rc=$?"; cp "$R/runs/overhead_summary.json" "$R/$G/bench/run-overhead-duty5.json" 2>/dev/null; cat "$R/$G/bench/run-overhead-duty5.txt"
rm -rf "$R/runs"
tar -C "$R" -czf "$OUT/s3f.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
