#!/usr/bin/env bash
# Session 3, call C: why the transformer step stays slower between traced periods. Modes rotate
# per repetition: none, sensors only, duty cycle (detach), detached once after the first period.
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3c"; mkdir -p "$R/$G/bench"
nvidia-smi --query-gpu=name,clocks.sm,power.limit,persistence_mode,temperature.gpu --format=csv,noheader
timeout 400 python3 benchmarks/bench_run_overhead.py --workloads torch --modes sensors,duty,once \
  --reps 6 --min-block-s 5 --duty 0.3/3 --duty-mode detach --out "$R/runs" > "$R/$G/bench/run-overhead-torch.txt" 2>&1
echo "rc=$?"; cat "$R/$G/bench/run-overhead-torch.txt"
cp "$R/runs/overhead_summary.json" "$R/$G/bench/run-overhead-torch.json" 2>/dev/null
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
rm -rf "$R/runs"
tar -C "$R" -czf "$OUT/s3c.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
