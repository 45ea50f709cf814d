#!/usr/bin/env bash
# Session 15: session 14's links model and replicates (frozen in c4bf71a, 2c59939), to be held out on an H200 (never before; the call that
#   asked for one got H100 GPU-b141875d), sized for the
# ~15 device minutes left in session 15: the transformer training step only (validate_attribution_real.py --only transformer),
# replay's design with the links model and replicates (the defaults since session 14) in a design budget of 250 s
# (400 s in plan_s14a), every other rule as committed. The attribution step is limited to 420 s so that the archives
# are written before the lease ends.
#
#   OUT=/dir scripts/plan_s15b.sh          (scripts/device_bg.sh start WAIT plan_s15b runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=420 ATTRIBUTION_ARGS="--only transformer --design-budget-s 250" OUT="$OUT" \
  scripts/device.sh attribution
