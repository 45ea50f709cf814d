#!/usr/bin/env bash
# Session 8's call on one GPU, after graph replay learnt to restore the step's state: install archline once,
# then check the fix (gputest, datacheck) and redo the attribution of real training loops with priors from
# the (now clean) replay's randomized design. Raw CUPTI traces come back gzipped (large-*.gz).
#
#   OUT=/dir scripts/plan_s8.sh          (scripts/device_bg.sh start WAIT plan_s8 runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
MAX_LARGE=2 OUT="$OUT" scripts/device.sh gputest datacheck attribution
