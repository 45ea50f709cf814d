#!/usr/bin/env bash
# Session 25, frozen in the commit that added it, before it ran; on the machine plan_s25b held (H100 GPU-bd689f88, kept
# warm). plan_s25b's decode replay ran (259 s) but its `archline counts` of 400 launches overran the step's 540 s. Here
# the same decode loop without the replay (plan_s25b's replay on this board is the reference), its counts capped at
# 200 launches after skipping 300 (past the prompt's forward pass, into the tokens' decoding), then
# `archline run --prior-model` with plan_s25a's H100 model. About 4 minutes. Archives come back as all-*.
#   OUT=/dir scripts/plan_s25c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=480 \
  ATTRIBUTION_ARGS="--only decode --no-replay --count-launches 200 --count-skip 300 --prior-source model --prior-model $PWD/results/h100/roofline-ml-v2-8908fa3f" \
  OUT="$OUT/all" scripts/device.sh attribution
