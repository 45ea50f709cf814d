#!/usr/bin/env bash
# Session 30, one GPU (an H100 asked for; say which board came beside its figures). Frozen in the commit that adds it.
#   plan_s30a (H200 GPU-0496e08b) replayed VGG-16's groups alone by PyTorch's own toggling: every child failed to
#   switch 6 cluster-launched nodes (CUDA error 912), so it said nothing on the hang of session 29. Here the groups are
#   walked alone as `archline replay` switches them (its switching mode, pinned and kept nodes, a whole step before
#   each switched replay), a group that does not end within 30 s counted a hang and a new child going on after it:
#   1. memsets only kept on (as before session 30);
#   2. memsets and the workspace set-up kernels kept on (replay's new WORKSPACE_INIT rule: cuDNN's
#      init_device_workspace_kernel before its weight-gradient kernels).
#   H: the session-29 hang is a weight-gradient group waiting on its workspace's set-up kernel; walk 1 hangs on
#   weight-gradient groups, walk 2 on none. Refuted if walk 2 hangs too, or walk 1 does not.
#   3. vgg16cl attribution with the new rule (links design 200 s, replay priors, 12 s traced; no attribution rule
#      changed): whatever walk 2 says (the watchdog ends it in 60 s with the group's whole name if it hangs).
# About 15 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s30b, then wait).
# Locally: scripts/slim_tree.sh out first, back after. Archives: all-* (walk 1), all2-* (walk 2), all3-* (attribution).
#   OUT=/dir scripts/plan_s30b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv
SKIP_INSTALL=1 PROBE_ONLY=vgg16cl PROBE_LIMIT=300 PROBE_ARGS="--walk --no-workspace-init --timeout-s 30 --limit-s 200" \
  OUT="$OUT/all" scripts/device.sh probe
SKIP_INSTALL=1 PROBE_ONLY=vgg16cl PROBE_LIMIT=300 PROBE_ARGS="--walk --timeout-s 30 --limit-s 200" \
  OUT="$OUT/all2" scripts/device.sh probe
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=480 \
  ATTRIBUTION_ARGS="--only vgg16cl --design-model links --design-budget-s 200" \
  OUT="$OUT/all3" scripts/device.sh attribution
