#!/usr/bin/env bash
# Frozen in session 19 before it ran. On the H200 if one is lent (nvidia-h200 kind):
#  1. the GPU tests;
#  2. graph replay in two separate processes, the transformer (150 s) and ResNet-50 channels_last (200 s), the five
#     largest groups by CUPTI busy time, then benchmarks/replay_across.py (issue 13's 3 % from one run to the next;
#     on H100 GPU-346936bb in plan_s19a both passed);
#  3. benchmarks/sensor_contention.py without the dose (--copies 1: none and one alone), 480 s. Same rule as
#     sessions 17-18: the mean launch + synchronise time per cycle, one sampler against none, Hodges-Lehmann with its
#     signed-rank interval, two-sided against 3 %. Why: session 18's 360 s run (three states) gave +0.54 %
#     [-2.19, +3.71] over 45 cycles; two states give about twice the cycles per second, each pair adjacent.
# About 14 minutes.
#
#   OUT=/dir scripts/plan_s19b.sh          (scripts/device_bg.sh start WAIT plan_s19b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 OUT="$OUT" scripts/device.sh gputest across
REPLAY_ONLY=resnet50 REPLAY_BUDGET_S=200 REPLAY_LIMIT=300 SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh across
CONTENTION_SECONDS=480 CONTENTION_COPIES=1 CONTENTION_LIMIT=560 SKIP_INSTALL=1 OUT="$OUT/all2" scripts/device.sh contention
