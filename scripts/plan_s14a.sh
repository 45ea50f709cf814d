#!/usr/bin/env bash
# Session 14's held-out run of replay's replicates (frozen in the commit that added this script): on whatever single
# GPU comes, the GPU tests, then the attribution of both real training loops (validate_attribution_real.py) with
# the design measuring a fifth of its measurements twice (--design-replicates auto, the default since this session)
# in a design budget of 400 s (300 s before); every other rule as committed at the end of session 13.
#
#   OUT=/dir scripts/plan_s14a.sh          (scripts/device_bg.sh start WAIT plan_s14a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=2 ATTRIBUTION_LIMIT=1400 OUT="$OUT" scripts/device.sh gputest attribution
