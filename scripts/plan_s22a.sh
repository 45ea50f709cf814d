#!/usr/bin/env bash
# Prepared in session 21 for the next device session (frozen in the commit that added it; not yet run). One GPU
# (ask nvidia-h200: no H200 has run the sensors' contention, and the H200's transformer replays across processes
# failed once, docs/replay.md "Session 21"):
#   1. benchmarks/sensor_contention.py --copies 1 --launches 64 --seconds 600: the sensors' share on a loop of 64
#      launches per synchronise (launch-bound, synchronising rarely, as a decode loop does once a token); plan_s21d
#      bounded it on launch + synchronise (+0.20 % [-0.74, +1.24], H100 GPU-83db9584). Judged as there: PASS only where
#      the whole interval lies within ±3 %.
#   2. the transformer's graph replay in two separate processes, each replay configuration measured for 3 s instead of
#      1 s (--replay-s 3; 300 s allowed a process): session 21's H200 pair (1 s, 45 s a process) had two groups of five
#      move 3.5 and 3.9 % with their replays' own noise at 2.4 %. Then benchmarks/replay_across.py against 3 %.
# About 17 minutes (its steps' limits allow about 25, close to a machine's 30-minute hold): run it detached
# (scripts/device_bg.sh start 580 plan_s22a, then wait). Locally, first: scripts/slim_tree.sh out, and back after. The
# contention's archives come back as logs-*/results-*, the replays' as all-*.
#   OUT=/dir scripts/plan_s22a.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
CONTENTION_SECONDS=600 CONTENTION_COPIES=1 CONTENTION_LAUNCHES=64 CONTENTION_LIMIT=680 OUT="$OUT" \
  scripts/device.sh contention
REPLAY_ONLY=transformer REPLAY_BUDGET_S=300 REPLAY_LIMIT=380 REPLAY_ARGS="--replay-s 3" SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh across
