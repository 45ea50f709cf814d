#!/usr/bin/env bash
# Prepared in session 22 after plan_s22a/b ran on an H100 (GPU-e7ad0b8d) although an H200 was asked for (frozen in the
# commit that added it). Ask nvidia-h200-x2 (session 21 got a real 2×H200 host that way); about 9 minutes of the
# session's last 13:
#   GPU 1: the transformer's graph replay in two separate processes at 3 s a configuration (plan_s22a's second step:
#          session 21's H200 pair at 1 s failed, 3.87 and 3.46 %), then benchmarks/replay_across.py against 3 %; then
#          the sensors' contention on 64 launches per synchronise for 240 s (plan_s22a's first step, shorter), while
#          GPU 0 still works: labelled so, a node's other GPU busy;
#   GPU 0: the transformer's attribution at batch 128 (plan_s22b's second step) on an H200.
# Run detached (scripts/device_bg.sh start 570 plan_s22c, then wait). Locally: scripts/slim_tree.sh out first, back
# after. GPU 0's archives come back as all-*, GPU 1's replays as all2-*, its contention as all3-*.
#   OUT=/dir scripts/plan_s22c.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/install" "$OUT/all" "$OUT/all2" "$OUT/all3"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128" \
  OUT="$OUT/all" scripts/device.sh attribution >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=300 REPLAY_LIMIT=380 REPLAY_ARGS="--replay-s 3" \
    OUT="$OUT/all2" scripts/device.sh across
  SKIP_INSTALL=1 ON_GPU=1 CONTENTION_SECONDS=240 CONTENTION_COPIES=1 CONTENTION_LAUNCHES=64 CONTENTION_LIMIT=300 \
    OUT="$OUT/all3" scripts/device.sh contention
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
