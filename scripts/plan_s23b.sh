#!/usr/bin/env bash
# Session 23, frozen in the commit that added it, before it ran. Holds out the fixed cost's new allocation
# (replay.fixed_reps: each pass measures a replay's fixed cost √G times, spread over the pass, and takes their mean
# out of every group; committed before this plan) on a host of two H200s, and adds an H200 attribution at batch 16:
#   GPU 0: the transformer's graph replay in two separate processes, 3 s a configuration, three passes each
#          (plan_s23a's settings, so the fixed cost's spread within and between processes compares with it); then
#          the transformer's attribution at batch 16 (links, 250 s design);
#   GPU 1: the same replay pair of the transformer; then ResNet-50's replay pair (plan_s18b's settings: 1 s, one pass).
# Run detached (scripts/device_bg.sh start 570 plan_s23b, then wait). Locally: scripts/slim_tree.sh out first, back
# after. GPU 0's replays come back as all-*, its attribution as all2-*; GPU 1's as all3-* (both workloads).
#   OUT=/dir scripts/plan_s23b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
( SKIP_INSTALL=1 ON_GPU=0 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all" scripts/device.sh across
  SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
    ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 16" \
    OUT="$OUT/all2" scripts/device.sh attribution
) >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all3" scripts/device.sh across
  for f in "$OUT"/all3/*-across.tar.gz; do [ -f "$f" ] && mv "$f" "${f%.tar.gz}-transformer.tar.gz"; done
  SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=150 REPLAY_LIMIT=260 OUT="$OUT/all3" scripts/device.sh across
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
