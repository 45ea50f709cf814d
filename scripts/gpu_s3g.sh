#!/usr/bin/env bash
# Session 3, call G: smoke run of the injection library as changed after review (detach claimed
# atomically, cuptiFinalize outside locks, incomplete records counted) on a launch-bound program.
set -u
. scripts/gpu_env.sh
G=${G:-h200}; R="$OUT/s3g"; mkdir -p "$R"
timeout 100 python3 -m archline run --json --force -o "$R/$G/run/duty-detach-final-smoke" --tracer inject \
  --trace-duty 1/2 -- python3 benchmarks/workload_launch_bound.py 1500000 > "$R/smoke.json" 2> "$R/smoke.err"
echo "rc=$?"; tail -n 3 "$R/smoke.err"
python3 -c "
import json,sys; d=json.load(open('$R/smoke.json'))
print('notes:'); [print(' ', n) for n in d.get('notes', [])]
print('rows:', [(r['name'][:20], r['calls']) for r in d['result']['rows'][:4]])" 2>&1 | tail -n 20
rm -rf "$R"/$G/run/*/raw "$R"/$G/run/*/trace.perfetto.json
tar -C "$R" -czf "$OUT/s3g.tar.gz" . && rm -rf "$R"; ls -la "$OUT"
