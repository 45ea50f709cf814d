#!/usr/bin/env bash
# Session 24, frozen in the commit that added it, before it ran. Ask nvidia-h100-x2 again (plan_s24b asked for H100s and
# was lent H200s): the noisy-group rule (replay._alone) has still not met the cuBLAS GEMM whose measurements alone were
# noisy on two H100s (docs/replay.md "Session 24"). Two more boards, no rule changed:
#   GPU 0: the transformer's graph replay in two separate processes, 3 s a configuration, three passes each, then
#          benchmarks/replay_across.py against 3 % (plan_s24a's first step);
#   GPU 1: the same pair; then ResNet-50's pair (1 s, one pass).
# About 5 minutes. Run detached (scripts/device_bg.sh start 500 plan_s24c, then wait). Locally: scripts/slim_tree.sh
# out first, back after. GPU 0's archives come back as all-*, GPU 1's transformer pair as all3-*-transformer and its
# ResNet-50 pair as all3-*.
#   OUT=/dir scripts/plan_s24c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 ON_GPU=0 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
  REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all" scripts/device.sh across >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all3" scripts/device.sh across
  for f in "$OUT"/all3/*-across.tar.gz; do [ -f "$f" ] && mv "$f" "${f%.tar.gz}-transformer.tar.gz"; done
  SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=150 REPLAY_LIMIT=260 OUT="$OUT/all3" scripts/device.sh across
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 20 "$OUT/$part.log"; done
