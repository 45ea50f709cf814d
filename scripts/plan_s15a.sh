#!/usr/bin/env bash
# Session 15's held-out run of session 14's two rules on a new board, both real training loops: replay's replicates
# and its links model (the defaults since session 14, frozen in commits 2c59939 and c4bf71a), never yet held out on
# ResNet-50 (the links model). The GPU tests, then the attribution of both loops (validate_attribution_real.py),
# design budget 400 s as in plan_s14a; every rule as committed at the end of session 14.
#
#   OUT=/dir scripts/plan_s15a.sh          (scripts/device_bg.sh start WAIT plan_s15a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=2 ATTRIBUTION_LIMIT=1400 OUT="$OUT" scripts/device.sh gputest attribution
