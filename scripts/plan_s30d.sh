#!/usr/bin/env bash
# Session 30, one GPU (any H100 or H200; say which came). Frozen in the commit that adds it. The last 250 s of the
# session's device time: `archline replay` itself, the installed wheel's CLI, on VGG-16's step (no design; the top 8
# groups alone and without them), which session 29 never ran on a GPU: its progress lines on stderr, the notes naming
# the workspace set-up kernels kept on, and whether the step replays with the rule through the CLI. Nothing scored.
# About 4 minutes held. Run it in the foreground (one call): OUT=/dir scripts/plan_s30d.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
nvidia-smi --query-gpu=index,name,uuid,power.limit,persistence_mode,clocks.sm,driver_version --format=csv \
  | tee "$OUT/nvidia-smi.csv"
export PYTHONPATH=/tmp/archline-site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/archline-site/bin:$PATH
t0=$(date +%s)
timeout 200 archline replay benchmarks/workloads/vgg16_replay.py:make --top 8 -o "$OUT/vgg16cl-replay" \
  >"$OUT/replay.out" 2>"$OUT/replay.err"
echo "rc=$? $(( $(date +%s) - t0 )) s"
tail -n 25 "$OUT/replay.err"; tail -n 40 "$OUT/replay.out"
