#!/usr/bin/env bash
# Session 25, frozen in the commit that added it, before it ran. One GPU (ask nvidia-h100-x1; an H200 may come). Model
# priors on the issue's launch-bound program, GPT-2 greedy decoding with a KV cache (benchmarks/validate_attribution_real
# .py's decode: 64 tokens a step, fp16, batch 1), which graph replay is not made for: its replay runs first without a
# design (isolated energies only, where it captures at all; a failure is recorded and the run goes on), then
# `archline counts --profiler-range --launch-count 400` of one step (ncu takes 0.3-0.5 s a launch), then
# `archline run --prior-model M --prior-counts CSV` of the loop. M as plan_s25a fixed it (H100:
# results/h100/roofline-ml-v2-8908fa3f; H200: results/h200/roofline-ml-v2-339faabf).
# About 6 minutes. Run detached (scripts/device_bg.sh start 560 plan_s25b). Locally: scripts/slim_tree.sh out first, back
# after. Its archives come back as all-*.
#   OUT=/dir scripts/plan_s25b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
if nvidia-smi -i 0 --query-gpu=name --format=csv,noheader | grep -q H200; then
  m="$PWD/results/h200/roofline-ml-v2-339faabf"
else
  m="$PWD/results/h100/roofline-ml-v2-8908fa3f"
fi
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=540 \
  ATTRIBUTION_ARGS="--only decode --design none --prior-source model --prior-model $m" \
  OUT="$OUT/all" scripts/device.sh attribution
tail -n 40 "$OUT"/all/logs/attribution.log 2>/dev/null || true
