#!/usr/bin/env bash
# Prepared in session 22 for the next device session (frozen in the commit that added it; not yet run). plan_s22c with
# one change: each of the two replay processes makes three passes (--repeats 3), so a replay's fixed cost (the replay
# with no group enabled, taken out of every group) is measured three times inside each process. Session 22 found,
# post hoc, that session 21's H200 pair failed by the fixed cost's 8.6 % change between the processes while the
# groups' replays as measured agreed within 0.59 % (docs/replay.md "Session 22"); whether the fixed cost also moves
# inside a process, or only between processes, decides how to measure it better. Ask nvidia-h200-x2 (H200s have
# run this only once); about 10 minutes:
#   GPU 1: the transformer's graph replay in two separate processes, 3 s a configuration, three passes each, the clocks
#          recorded; then benchmarks/replay_across.py (--raw, information, is redone locally from the shipped runs);
#          then the sensors' contention on 64 launches per synchronise for 240 s, while GPU 0 still works (labelled
#          so);
#   GPU 0: the transformer's attribution at batch 128.
# Run detached (scripts/device_bg.sh start 570 plan_s23a, then wait). Locally: scripts/slim_tree.sh out first, back
# after. GPU 0's archives come back as all-*, GPU 1's replays as all2-*, its contention as all3-*.
#   OUT=/dir scripts/plan_s23a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 ON_GPU=0 MAX_LARGE=1 ATTRIBUTION_LIMIT=560 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128" \
  OUT="$OUT/all" scripts/device.sh attribution >"$OUT/gpu0.log" 2>&1 &
p0=$!
( SKIP_INSTALL=1 ON_GPU=1 REPLAY_ONLY=transformer REPLAY_BUDGET_S=420 REPLAY_LIMIT=480 \
    REPLAY_ARGS="--replay-s 3 --repeats 3" OUT="$OUT/all2" scripts/device.sh across
  SKIP_INSTALL=1 ON_GPU=1 CONTENTION_SECONDS=240 CONTENTION_COPIES=1 CONTENTION_LAUNCHES=64 CONTENTION_LIMIT=300 \
    OUT="$OUT/all3" scripts/device.sh contention
) >"$OUT/gpu1.log" 2>&1 &
p1=$!
wait $p0; echo "gpu0 part ended: rc=$?"
wait $p1; echo "gpu1 part ended: rc=$?"
for part in gpu0 gpu1; do echo "=== $part"; tail -n 30 "$OUT/$part.log"; done
