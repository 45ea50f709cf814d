#!/usr/bin/env bash
# One call's plan on a host of two GPUs (nvidia-h200-x2 / h100-x2): install archline once, then
#   GPU 0: the roofline with the ML kernels, scored (steps roofline model),
#   GPU 1 at the same time: graph replay and attribution of real training loops (replay attribution),
# and, when both have ended, the node steps over both GPUs (${NODE_STEPS:-noderun}).
# Each part writes its archives into its own folder; the last lines gather them into $OUT.
#
#   OUT=/dir scripts/plan_node2.sh          (scripts/device_bg.sh start WAIT plan_node2 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/install" "$OUT/gpu0" "$OUT/gpu1" "$OUT/node"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
SKIP_INSTALL=1 OUT="$OUT/gpu0" scripts/device.sh roofline model >"$OUT/gpu0.log" 2>&1 &
p0=$!
SKIP_INSTALL=1 ON_GPU=1 OUT="$OUT/gpu1" scripts/device.sh replay attribution >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p1; echo "gpu1 part ended: rc=$?"
wait $p0; echo "gpu0 part ended: rc=$?"
# shellcheck disable=SC2086
SKIP_INSTALL=1 OUT="$OUT/node" scripts/device.sh ${NODE_STEPS:-noderun} >"$OUT/node.log" 2>&1
echo "node part ended: rc=$?"
for part in gpu0 gpu1 node; do echo "=== $part"; tail -n 45 "$OUT/$part.log"; done
mkdir -p "$OUT/all"
cp "$OUT"/gpu0/*.tar.gz "$OUT"/gpu1/*.tar.gz "$OUT"/node/*.tar.gz "$OUT/all/" 2>/dev/null
ls -la "$OUT/all"
