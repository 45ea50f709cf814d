#!/usr/bin/env bash
# Prepared in session 17 for the next device session (frozen in the commit that added it; not yet run): the busy-time
# design model, archline replay's default since session 17, held out.
#  1. the GPU tests, among them tests/gpu/test_replay_busy_gpu.py: CUPTI times a captured step's replay under the
#     names graph capture gives its nodes (the model matches the two by name; where it cannot, it fits links);
#  2. the transformer's attribution with every rule as committed (design budget 250 s, as plan_s16b): whether the
#     busy model's √E[ρ²] is below the links model's on the same design (benchmarks/design_adjacency.py refits
#     links from the record) and the kernel energy within ±15 % (issue 13: 80 %).
# About 10 minutes on an H100 (the install, the tests ~1 min, the attribution ~8 min).
#
#   OUT=/dir scripts/plan_s17b.sh          (scripts/device_bg.sh start WAIT plan_s17b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=560 ATTRIBUTION_ARGS="--only transformer --design-budget-s 250" \
  OUT="$OUT" scripts/device.sh gputest attribution
