#!/usr/bin/env bash
# Session 2, call D (H100): duty-cycled kernel tracing (overhead and agreement with full tracing),
# then the sampler benchmark with the fixed capture matching.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2d"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 16 "$R/$name.log"; }
step duty 420 python3 benchmarks/validate_duty.py "$R/$G/run/duty-check-long" --reps 1 --calls 10000000 --duty 0.9/6
step sampler 150 python3 benchmarks/bench_sampler.py --seconds 30 --out "$R/$G/bench/sampler.json"
rm -rf "$R"/$G/run/duty-check-long/*/raw "$R"/$G/run/duty-check-long/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s2d.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
