#!/usr/bin/env bash
# Session 3, call B: recording overhead of full and duty-cycled (detach) injection tracing on the
# launch-bound workloads, alternating reps, with the per-loop split into traced and untraced periods.
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3b"; mkdir -p "$R/$G/bench"
nvidia-smi --query-gpu=name,clocks.sm,power.limit,persistence_mode,temperature.gpu --format=csv,noheader
timeout 540 python3 benchmarks/bench_run_overhead.py --workloads small,torch,launch --modes inject,duty \
  --reps 4 --min-block-s 5 --duty 0.3/3 --duty-mode detach --out "$R/runs" > "$R/$G/bench/run-overhead-duty.txt" 2>&1
echo "rc=$?"; cat "$R/$G/bench/run-overhead-duty.txt"
cp "$R/runs/overhead_summary.json" "$R/$G/bench/run-overhead-duty.json" 2>/dev/null
rm -rf "$R/runs"
tar -C "$R" -czf "$OUT/s3b.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
