#!/usr/bin/env bash
# One call's plan on a host of two GPUs (next after session 7): install archline once, then at the same time
#   GPU 0: the roofline with the ML kernels, scored by every protocol (roofline model; protocol v2 out of sample
#          on a new board, an H200 if one is lent);
#   GPU 1: attribution of real training loops with priors from replay's randomized design (attribution, ~10 min).
# Raw CUPTI traces come back gzipped (large-*.gz) so the attribution can be redone on a CPU.
#
#   OUT=/dir scripts/plan_node2c.sh          (scripts/device_bg.sh start WAIT plan_node2c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/install" "$OUT/gpu0" "$OUT/gpu1"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
SKIP_INSTALL=1 OUT="$OUT/gpu0" scripts/device.sh roofline model >"$OUT/gpu0.log" 2>&1 &
p0=$!
SKIP_INSTALL=1 ON_GPU=1 MAX_LARGE=2 OUT="$OUT/gpu1" scripts/device.sh attribution >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 40 "$OUT/$part.log"; done
OUT="$OUT" scripts/gather_parts.sh gpu0 gpu1
