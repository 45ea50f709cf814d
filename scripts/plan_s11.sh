#!/usr/bin/env bash
# Session 11's call on a host of two H200s (nvidia-h200-x2; no single H200 was lent in sessions 7-10). Install
# archline once, then at the same time
#   GPU 0: issue 15's out-of-sample run of protocol v2 (roofline model: the roofline with the ML kernels, scored);
#   GPU 1: burst_power.py (an H200's burst power), then the attribution of both real training loops with the rules
#          as committed (7312318: bounds from a shipped burst ceiling of the same board, none yet for an H200, so
#          the limit): issue 13's first H200 figure, held out from every choice.
# On any other board it does nothing (exit 3), so that the machine can be given back at once.
# Raw CUPTI traces come back gzipped (large-*.gz) so the attribution can be redone on a CPU.
#
#   OUT=/dir scripts/plan_s11.sh          (scripts/device_bg.sh start WAIT plan_s11 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -qi h200; then echo "no H200 here"; exit 3; fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/install" "$OUT/gpu0" "$OUT/gpu1"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
SKIP_INSTALL=1 ROOFLINE_LIMIT=960 OUT="$OUT/gpu0" scripts/device.sh roofline model >"$OUT/gpu0.log" 2>&1 &
p0=$!
SKIP_INSTALL=1 ON_GPU=1 MAX_LARGE=2 ATTRIBUTION_LIMIT=1150 OUT="$OUT/gpu1" scripts/device.sh burst attribution >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 40 "$OUT/$part.log"; done
OUT="$OUT" scripts/gather_parts.sh gpu0 gpu1
