#!/usr/bin/env bash
# Prepared in session 29 for a later device session (frozen in the commit that added it; not yet run). One GPU, an
# H200 asked for (nvidia-h200; the device tool may lend an H100: say so beside its figures).
#   1. Which of VGG-16's groups hang when replayed alone (session 29: a replay timing a cuDNN weight-gradient group
#      alone did not finish within 60 s, GPU-3f969882): benchmarks/replay_probe.py --workload vgg16cl --modes alone,
#      each group in a child of its own, killed after 60 s and counted a hang (each trial kept as it ends, so the
#      step's 540 s limit keeps what was found). Tells whether pinning the hanging
#      groups on (replay's exclude) could make the step replayable; nothing is scored.
#   2. transformer2k as plan_s29a/c (d = 2048, batch 8, links design 250 s, replay priors, 12 s traced; no rule
#      changed) on an H200, where no run of it exists: plan_s29a's H1 (≥ 80 % of kernel energy within ±15 %) asked
#      on the issue's second GPU kind.
# About 17 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s30a, then wait).
# Locally: scripts/slim_tree.sh out first, back after. Archives: all-* (probe), all2-* (transformer2k).
#   OUT=/dir scripts/plan_s30a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv
SKIP_INSTALL=1 PROBE_ONLY=vgg16cl PROBE_LIMIT=540 PROBE_JOBS=3 PROBE_ARGS="--modes alone --timeout-s 60" \
  OUT="$OUT/all" scripts/device.sh probe
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=600 \
  ATTRIBUTION_ARGS="--only transformer2k --design-model links --design-budget-s 250 --transformer-batch 8" \
  OUT="$OUT/all2" scripts/device.sh attribution
