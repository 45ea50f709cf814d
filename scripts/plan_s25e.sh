#!/usr/bin/env bash
# Session 25, frozen in the commit that added it, before it ran; on the machine plan_s25d held (H100 GPU-8cff9f30). Its
# probe: the decode loop's profiled step took 22 s alone and 81 s under ncu with 20 launches profiled. Here the decode
# loop with model priors from 100 counted launches (the prompt's forward pass and the first tokens), no replay (the
# reference replay is plan_s25b's, on another board, GPU-bd689f88), a 6 s loop. Archives come back as all-*.
#   OUT=/dir scripts/plan_s25e.sh
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "$0")/.." || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/all"
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=280 \
  ATTRIBUTION_ARGS="--only decode --no-replay --seconds 6 --count-launches 100 --prior-source model --prior-model $PWD/results/h100/roofline-ml-v2-8908fa3f" \
  OUT="$OUT/all" scripts/device.sh attribution
