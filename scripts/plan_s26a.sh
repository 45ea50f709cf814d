#!/usr/bin/env bash
# Session 26, frozen in the commit that added it, before it ran. One H100 (nvidia-h100-x1), three steps in turn:
#   1. Does a longer recording narrow the rows? Every shipped attribution traced 12 s of training (the run's buffer
#      windows: 667 -> 1146 as a post hoc cut of plan_s22b's batch-128 trace grows from about 3 s to 12 s of training,
#      the share within ±15 % 40.1 -> 44.4 %, rows "mixed" 11 -> 33 %). The transformer at batch 128 as plan_s22b/c
#      (links design, 250 s, replay priors, no rule changed), traced for 120 s instead of 12 s. Scored at its full
#      length (the figures validate_attribution_real.py prints); the same trace cut to its first 12 s of training
#      (benchmarks/redo_attribution.py --cut-s 108) is this board's own reference at the earlier length.
#   2. The default's whole cost (sensors, tracing, the injection library, CUPTI's start) on the same step, GPU-bound:
#      benchmarks/bench_run_overhead.py --workloads torch128 (10 steps a loop), 7 alternating pairs of 20 s blocks,
#      children pinned, the robust per-loop change and its interval judged two-sided against 3 % (session 12's rule).
#   3. The GPU tests against the installed wheel (tests/gpu: among them archline counts, never run on a GPU).
# About 17 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s26a, then wait). Locally:
# scripts/slim_tree.sh out first, back after. Archives: all-* (attribution), all2-* (overhead), all3-* (tests).
#   OUT=/dir scripts/plan_s26a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=900 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128 --seconds 120" \
  OUT="$OUT/all" scripts/device.sh attribution
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=torch128 OVERHEAD_REPS=7 OVERHEAD_BLOCK_S=20 OUT="$OUT/all2" scripts/device.sh overhead
SKIP_INSTALL=1 OUT="$OUT/all3" scripts/device.sh gputest
