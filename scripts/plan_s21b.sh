#!/usr/bin/env bash
# Prepared in session 20 for a host of two GPUs (frozen in the commit that added it; not yet run). Ask for
# nvidia-h200-x2: issue 13 wants its figures on H200 too, and a single-GPU call asked for an H200 was lent an H100
# in sessions 18-20. Both GPUs work at once, so one call does what plan_s21a and a replay across processes would do
# one after the other:
#   GPU 0: the transformer's attribution with the default design (links, 250 s), as plan_s21a's first step: session
#          20's time rule held out;
#   GPU 1: graph replay of the transformer and of ResNet-50 (channels_last) in two separate processes each, then
#          benchmarks/replay_across.py (the five largest groups by CUPTI busy time against 3 %), as plan_s19a.
# About 10 minutes; longer than one call: run it detached (scripts/device_bg.sh start 580 plan_s21b, then wait).
# Locally, first: scripts/slim_tree.sh out, and back after the call. Ingest GPU 0's archives with
# scripts/ingest_attribution.sh (they come back as all-*.tar.gz), GPU 1's as session 19's replay-across runs.
#
#   OUT=/dir scripts/plan_s21b.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/install" "$OUT/all" "$OUT/all2"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250" \
  OUT="$OUT/all" scripts/device.sh attribution >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 OUT="$OUT/all2" scripts/device.sh across
  SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=200 REPLAY_LIMIT=300 OUT="$OUT/all3" scripts/device.sh across
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 40 "$OUT/$part.log"; done
