#!/usr/bin/env bash
# Session 2, call C (H100): duty-cycled kernel tracing (overhead and agreement with full tracing),
# then the sampler benchmark with the fixed capture matching.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2c"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 16 "$R/$name.log"; }
step duty 360 python3 benchmarks/validate_duty.py "$R/$G/run/duty-check" --reps 2 --calls 2000000 --duty 0.4/2,0.4/4
step sampler 150 python3 benchmarks/bench_sampler.py --seconds 30 --out "$R/$G/bench/sampler.json"
rm -rf "$R"/$G/run/duty-check/*/raw "$R"/$G/run/duty-check/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s2c.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
