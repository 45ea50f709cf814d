#!/usr/bin/env bash
# Session 26, frozen in the commit that added it, before it ran, with the session's last ~4 minutes of device time:
# does `archline counts --per-config 1` make the decode loop countable? Session 25 found ncu over 2 s a launch on it
# past the prompt (plan_s25d: its profiled step 22 s alone, 81 s with 20 launches counted; 100 launches overran 280 s).
# --per-config counts one launch of each launch configuration (kernel, grid, block) of the profiled step.
#   OUT=/dir scripts/plan_s26d.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
export PATH="/tmp/archline-site/bin:$PATH" PYTHONPATH="/tmp/archline-site${PYTHONPATH:+:$PYTHONPATH}"
B="$PWD/benchmarks/validate_attribution_real.py"
{
  nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,persistence_mode --format=csv,noheader
  s=$(date +%s); timeout 170 python3 -m archline counts -o "$OUT/decode-counts.csv" --gpu 0 --profiler-range \
    --per-config 1 --timeout 160 -- python3 "$B" --loop decode --profile-step
  echo "rc=$? under ncu, one launch of each configuration profiled: $(( $(date +%s) - s )) s"
  [ -f "$OUT/decode-counts.csv" ] && echo "counted launches: $(( $(wc -l <"$OUT/decode-counts.csv") - 1 ))"
} 2>&1 | tee "$OUT/probe.log"
