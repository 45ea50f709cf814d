#!/usr/bin/env bash
# One call's plan on a host of two GPUs (session 7): install archline once, then at the same time
#   GPU 0: the roofline with the ML kernels, scored (roofline model), then the tracing overhead of the decode loop;
#   GPU 1: attribution of real training loops with replay priors (attribution), then the tracing overhead of the
#          transformer and CNN training loops.
# The two overhead benchmarks are pinned to disjoint CPU sets. Each part writes its archives into its own folder.
#
#   OUT=/dir scripts/plan_node2b.sh          (scripts/device_bg.sh start WAIT plan_node2b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/install" "$OUT/gpu0" "$OUT/gpu1" "$OUT/gpu0b" "$OUT/gpu1b" "$OUT/gpu1c"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
(
  SKIP_INSTALL=1 OUT="$OUT/gpu0" scripts/device.sh roofline model >"$OUT/gpu0.log" 2>&1
  SKIP_INSTALL=1 ON_GPU=0 OVERHEAD_CPUS=8-15 OVERHEAD_WORKLOADS=decode OVERHEAD_REPS=5 OUT="$OUT/gpu0b" \
    scripts/device.sh overhead >"$OUT/gpu0b.log" 2>&1
) &
p0=$!
(
  SKIP_INSTALL=1 ON_GPU=1 OUT="$OUT/gpu1" scripts/device.sh attribution >"$OUT/gpu1.log" 2>&1
  SKIP_INSTALL=1 ON_GPU=1 OVERHEAD_CPUS=24-31 OVERHEAD_WORKLOADS=torch OVERHEAD_REPS=7 OUT="$OUT/gpu1b" \
    scripts/device.sh overhead >"$OUT/gpu1b.log" 2>&1
  SKIP_INSTALL=1 ON_GPU=1 OVERHEAD_CPUS=24-31 OVERHEAD_WORKLOADS=resnet OVERHEAD_REPS=5 OUT="$OUT/gpu1c" \
    scripts/device.sh overhead >"$OUT/gpu1c.log" 2>&1
) &
p1=$!
wait $p1; echo "gpu1 part ended: rc=$?"
wait $p0; echo "gpu0 part ended: rc=$?"
for part in gpu0 gpu0b gpu1 gpu1b gpu1c; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
OUT="$OUT" scripts/gather_parts.sh gpu0 gpu0b gpu1 gpu1b gpu1c
