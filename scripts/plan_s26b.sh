#!/usr/bin/env bash
# Session 26, frozen in the commit that added it, before it ran. One H100 (nvidia-h100-x1). plan_s26a measured the
# default's whole cost on the GPU-bound transformer step at batch 128 on H100 GPU-21b1215f (robust per-loop change
# +0.14 %, interval +0.04 .. +0.26 %, PASS). The same again on the board this call gets, then the CNN training step
# (ResNet-50, bf16, batch 64) under today's default (session 7 measured it last). Nothing else changes:
# benchmarks/bench_run_overhead.py, 7 alternating pairs of 20 s blocks, children pinned, the robust per-loop change
# judged two-sided against 3 %. About 15 minutes held: scripts/device_bg.sh start 560 plan_s26b, then wait. Archives:
# all-* (transformer at batch 128), all2-* (ResNet-50).
#   OUT=/dir scripts/plan_s26b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=torch128 OVERHEAD_REPS=7 OVERHEAD_BLOCK_S=20 OUT="$OUT/all" scripts/device.sh overhead
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=resnet OVERHEAD_REPS=7 OVERHEAD_BLOCK_S=20 OUT="$OUT/all2" scripts/device.sh overhead
