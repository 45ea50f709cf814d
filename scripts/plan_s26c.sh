#!/usr/bin/env bash
# Session 26, frozen in the commit that added it, before it ran; on the machine plan_s26b held, if the session's device
# time allows. The decode loop (GPT-2 greedy decoding with a KV cache, fp16, launch-bound): the default's whole cost
# by the same benchmark, 5 alternating pairs (the issue's minimum) of 20 s blocks. Sessions 7, 10 and 12 could not
# resolve it (processes differing by 12-30 %); this is one more try on another board, judged by the same rule.
#   OUT=/dir scripts/plan_s26c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=decode OVERHEAD_REPS=5 OVERHEAD_BLOCK_S=20 OUT="$OUT/all" scripts/device.sh overhead
