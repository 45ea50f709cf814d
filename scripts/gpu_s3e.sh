#!/usr/bin/env bash
# Session 3, call E: the recording-overhead figure of issue 6, with duty-cycled tracing (CUPTI
# detached between traced periods, 10 % duty) against full tracing, modes rotating per repetition.
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3e"; mkdir -p "$R/$G/bench"
nvidia-smi --query-gpu=name,clocks.sm,power.limit,persistence_mode,temperature.gpu --format=csv,noheader
timeout 470 python3 benchmarks/bench_run_overhead.py --workloads small,launch,torch --modes inject,duty \
  --reps 5 --min-block-s 5 --duty 0.3/3 --duty-mode detach --out "$R/runs" > "$R/$G/bench/run-overhead-duty.txt" 2>&1
echo "rc=$?"; cp "$R/runs/overhead_summary.json" "$R/$G/bench/run-overhead-duty.json" 2>/dev/null
timeout 80 python3 benchmarks/bench_run_overhead.py --workloads gemm --modes inject,duty \
  --reps 3 --duty 0.3/3 --duty-mode detach --out "$R/runs-gemm" > "$R/$G/bench/run-overhead-duty-gemm.txt" 2>&1
echo "rc=$?"; cat "$R/$G/bench/run-overhead-duty.txt" "$R/$G/bench/run-overhead-duty-gemm.txt"
cp "$R/runs-gemm/overhead_summary.json" "$R/$G/bench/run-overhead-duty-gemm.json" 2>/dev/null
rm -rf "$R/runs" "$R/runs-gemm"
tar -C "$R" -czf "$OUT/s3e.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
