#!/usr/bin/env bash
# Session 24, frozen in the commit that added it, before it ran. Ask nvidia-h100-x2: the transformer's largest cuBLAS
# GEMM failed graph replay's 3 % across processes on two H100s (GPU-80bea713, GPU-30c01d2f; its own measurements 2.5-4.2
# % each) and was quiet (0.62 %) on plan_s24a's H100, so the noisy-group rule (replay._alone, session 23) has not yet
# met it. Two more H100 boards, no rule changed:
#   GPU 0: the transformer's graph replay in two separate processes, 3 s a configuration, three passes each
#          (plan_s24a's first step), then benchmarks/replay_across.py against 3 %; then ResNet-50's pair (1 s, one pass);
#   GPU 1: the same transformer pair; then the transformer's attribution at batch 128 (links, 250 s design, as
#          plan_s22b/c: 44.4 and 45.0 % within ±15 % on two H100s), a third held-out H100 at that batch.
# About 12 minutes. Run detached (scripts/device_bg.sh start 570 plan_s24b, then wait). Locally: scripts/slim_tree.sh out
# first, back after. GPU 0's archives come back as all-* (the transformer's renamed *-transformer), GPU 1's replays as
# all3-*, its attribution as all2-*.
#   OUT=/dir scripts/plan_s24b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
( SKIP_INSTALL=1 ON_GPU=0 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all" scripts/device.sh across
  for f in "$OUT"/all/*-across.tar.gz; do [ -f "$f" ] && mv "$f" "${f%.tar.gz}-transformer.tar.gz"; done
  SKIP_INSTALL=1 ON_GPU=0 REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=150 REPLAY_LIMIT=260 OUT="$OUT/all" scripts/device.sh across
) >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all3" scripts/device.sh across
  SKIP_INSTALL=1 ON_GPU=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
    ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128" \
    OUT="$OUT/all2" scripts/device.sh attribution
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
