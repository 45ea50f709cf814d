#!/usr/bin/env bash
# Session 29's third plan, frozen in the commit that added it, before it ran. One GPU, an H200 asked for
# (nvidia-h200; the device tool may lend an H100).
#   1. vgg16cl as plan_s29b, with the replay watchdog (hw/sync_watchdog.py, 60 s, new since plan_s29b): expected to
#      end within about two minutes of its start with one line naming the trial that hung, exit 2, and its replay run
#      directory finished as failed (plan_s29b waited 430 s in torch.cuda.synchronize). A check of the fix on the real
#      program, not a score.
#   2. transformer2k as plan_s29a (d = 2048, batch 8, links design 250 s, replay priors, 12 s traced; no rule
#      changed), on a second board: plan_s29a's H1 (≥ 80 % of kernel energy within ±15 %) asked again, held out.
# About 11 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s29c, then wait).
# Locally: scripts/slim_tree.sh out first, back after. Archives: all-* (vgg16cl), all2-* (transformer2k).
#   OUT=/dir scripts/plan_s29c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=240 \
  ATTRIBUTION_ARGS="--only vgg16cl --design-model links --design-budget-s 120" \
  OUT="$OUT/all" scripts/device.sh attribution
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=600 \
  ATTRIBUTION_ARGS="--only transformer2k --design-model links --design-budget-s 250 --transformer-batch 8" \
  OUT="$OUT/all2" scripts/device.sh attribution
