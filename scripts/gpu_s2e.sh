#!/usr/bin/env bash
# Session 2, call E (H100): duty-cycled kernel tracing (overhead and agreement with full tracing),
# then the sampler benchmark with the fixed capture matching.
set -u
. scripts/gpu_env.sh
G=${G:-h100}; R="$OUT/s2e"; mkdir -p "$R"
step() { local name="$1" limit="$2"; shift 2; echo "=== $name"; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "rc=$rc  $(python3 -c "import time;print(round(time.time()-$t0,1))") s"; tail -n 16 "$R/$name.log"; }
step duty 420 python3 benchmarks/validate_duty.py "$R/$G/run/duty-check-reps" --reps 4 --calls 2000000 --duty 0.4/4
rm -rf "$R"/$G/run/duty-check-reps/*/raw "$R"/$G/run/duty-check-reps/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s2e.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
