#!/usr/bin/env bash
# Session 30, one GPU, an H200 asked for (nvidia-h200; an H100 may come: say which board beside its figures). Frozen in
# the commit that adds it. plan_s30b's H (VGG-16's replay hang is a weight-gradient group waiting on its workspace's
# set-up kernel) held on one H100 (GPU-5814e373): the memsets-only walk hung on one group, the walk with the set-up
# kernels kept on on none. Asked again on a second board, the issue's other kind:
#   1. the walk with the memsets only, 2. the walk with the set-up kernels kept on (as plan_s30b);
#   3. vgg16cl attribution (links design 150 s, replay priors, 12 s traced; no rule changed), VGG-16 on an H200.
# About 9 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s30c, then wait).
# Locally: scripts/slim_tree.sh out first, back after. Archives: all-* (walk 1), all2-* (walk 2), all3-* (attribution).
#   OUT=/dir scripts/plan_s30c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv
SKIP_INSTALL=1 PROBE_ONLY=vgg16cl PROBE_LIMIT=200 PROBE_ARGS="--walk --no-workspace-init --timeout-s 30 --limit-s 120" \
  OUT="$OUT/all" scripts/device.sh probe
SKIP_INSTALL=1 PROBE_ONLY=vgg16cl PROBE_LIMIT=200 PROBE_ARGS="--walk --timeout-s 30 --limit-s 120" \
  OUT="$OUT/all2" scripts/device.sh probe
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=400 \
  ATTRIBUTION_ARGS="--only vgg16cl --design-model links --design-budget-s 150" \
  OUT="$OUT/all3" scripts/device.sh attribution
