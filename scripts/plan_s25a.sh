#!/usr/bin/env bash
# Session 25, frozen in the commit that added it, before it ran. Ask nvidia-h100-x2 (H200s may come instead). Issue 13's
# last unbuilt source of prior: the counted energy model of this GPU kind. Each GPU runs
# benchmarks/validate_attribution_real.py --prior-source model: graph replay of one step first (links design, 250 s;
# the reference the rows are scored against, as in plan_s22b/c), then `archline counts --profiler-range` of one step of
# the very loop that is traced (ncu, clocks untouched), then `archline run --prior-model M --prior-counts CSV` of the
# loop. The model M is fixed here, before any scoring: the shipped protocol-v2 model of the same GPU kind whose held-out
# median |error| at measured time is the smallest (H100: results/h100/roofline-ml-v2-8908fa3f, 3.4 %; H200: the only
# one, results/h200/roofline-ml-v2-339faabf) -- a model of another board of the kind, which the run's own windows then
# rescale (prior_scale fit, as for replay priors). Nothing else changes.
#   GPU 0: the transformer training step at batch 128 (plan_s22b/c: 44.4 and 45.0 % within ±15 % with replay priors);
#   GPU 1: ResNet-50 training, bf16, batch 64.
# About 10 minutes. Run detached (scripts/device_bg.sh start 570 plan_s25a, then wait). Locally: scripts/slim_tree.sh out
# first, back after. GPU 0's archives come back as all-*, GPU 1's as all2-*.
#   OUT=/dir scripts/plan_s25a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
model() {  # the frozen model for GPU $1's kind
  if nvidia-smi -i "$1" --query-gpu=name --format=csv,noheader | grep -q H200; then
    echo "$PWD/results/h200/roofline-ml-v2-339faabf"
  else
    echo "$PWD/results/h100/roofline-ml-v2-8908fa3f"
  fi
}
( SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=900 \
    ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128 --prior-source model --prior-model $(model 0)" \
    OUT="$OUT/all" scripts/device.sh attribution
) >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=900 \
    ATTRIBUTION_ARGS="--only resnet50 --design-model links --design-budget-s 250 --prior-source model --prior-model $(model 1)" \
    OUT="$OUT/all2" scripts/device.sh attribution
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
