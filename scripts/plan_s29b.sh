#!/usr/bin/env bash
# Session 29's second plan, frozen in the commit that added it, before it ran. One H100 (nvidia-h100-x1).
# plan_s29a's vgg16cl step (VGG-16, channels_last, bf16, batch 64) ended at its 600 s limit with nothing printed after
# the board: graph replay never returned. A diagnosis, not a score: the same workload with replay's progress lines
# (replay_progress.py, new) and, where the limit ends it, every thread's stack (faulthandler on SIGTERM), with a
# design of 120 s so that a replay that is only slow can end. If it ends, its figures are a run with a 120 s design,
# reported as such (plan_s29a's H2 named 250 s), on whichever board this is.
# About 8 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s29b, then wait).
# Locally: scripts/slim_tree.sh out first, back after. Archive: all-* (vgg16cl).
#   OUT=/dir scripts/plan_s29b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=430 \
  ATTRIBUTION_ARGS="--only vgg16cl --design-model links --design-budget-s 120" \
  OUT="$OUT/all" scripts/device.sh attribution
