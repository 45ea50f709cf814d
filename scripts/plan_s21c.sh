#!/usr/bin/env bash
# Session 21, on the two-H200 host plan_s21b ran on, while still held: plan_s21a's two steps at once, with no change
# to any rule (session 20's time rule held out): GPU 0 ResNet-50 (channels_last), GPU 1 the transformer (a second
# H200 board for it). Archives come back as all-* (GPU 0) and all2-* (GPU 1).
#   OUT=/dir scripts/plan_s21c.sh   (scripts/device_bg.sh start WAIT plan_s21c)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/install" "$OUT/all" "$OUT/all2"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only resnet50cl --design-model links --design-budget-s 250" \
  OUT="$OUT/all" scripts/device.sh attribution >"$OUT/gpu0.log" 2>&1 &
p0=$!
SKIP_INSTALL=1 ON_GPU=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250" \
  OUT="$OUT/all2" scripts/device.sh attribution >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 40 "$OUT/$part.log"; done
