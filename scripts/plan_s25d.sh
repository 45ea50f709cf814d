#!/usr/bin/env bash
# Session 25, frozen in the commit that added it, before it ran: a probe of why `archline counts` of the decode loop
# overran twice (plan_s25b/c). One GPU, the session's last ~4 minutes of device time. Times, each under its own limit:
#   1. the decode loop's profiled step without ncu (model build, three warm-up steps of ~10 000 launches, one step);
#   2. the same under `archline counts --profiler-range --launch-count 20` (ncu attached to every launch, 20 profiled).
# If 2 is far longer than 1 with only 20 launches profiled, ncu's cost is in the launches it only intercepts.
#   OUT=/dir scripts/plan_s25d.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
export PATH="/tmp/archline-site/bin:$PATH" PYTHONPATH="/tmp/archline-site${PYTHONPATH:+:$PYTHONPATH}"
B="$PWD/benchmarks/validate_attribution_real.py"
{
  s=$(date +%s); timeout 100 python3 "$B" --loop decode --profile-step; echo "rc=$? no ncu: $(( $(date +%s) - s )) s"
  s=$(date +%s); timeout 150 python3 -m archline counts -o "$OUT/decode-counts.csv" --gpu 0 --profiler-range \
    --launch-count 20 --timeout 140 -- python3 "$B" --loop decode --profile-step
  echo "rc=$? under ncu, 20 launches profiled: $(( $(date +%s) - s )) s"
} 2>&1 | tee "$OUT/probe.log"
