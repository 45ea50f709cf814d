#!/usr/bin/env bash
# Session 27's third plan, frozen in the commit that added it, before it ran. One H200 (nvidia-h200).
# On two H100s (plan_s27a/b) the board's own sensor calibration gave the buffer's windows a lower spread against
# replay's priors than the shipped Hopper prior (0.5 against 33.2 %, post hoc; 37.0 against 46.2 %, planned) but left
# no row within ±15 %. This plan asks the same on an H200, at batch 16, where session 23's H200 gave 35.8 %:
#   1. archline sensor calibrate of this board (full schedule; the profile goes to the user's cache);
#   2. the transformer at batch 16 as plan_s23b (links design, 250 s, replay priors, 12 s traced, no rule changed);
#      archline run takes the board's own calibration.
# Scored, decided before the run, on this trace redone on the CPU with either model (benchmarks/redo_attribution.py
# --sensor-profiles: this board's profiles.json, and the shipped H200 prior results/h200/sensor/calibration/
# profiles.json):
#   H1: the own model's share within ±15 % is more than 5 points above the shipped prior's, or its windows accept the
#       priors where the shipped prior's refuse them; otherwise refuted on this board.
#   H2: the own model's ρ̂ is lower than the shipped prior's.
# The share as run (the own model) is this board's score. About 10 minutes held. Run detached
# (scripts/device_bg.sh start 560 plan_s27c, then wait). Locally: scripts/slim_tree.sh out first, back after.
# Archives: all3-* (sensor), all-* (attribution).
#   OUT=/dir scripts/plan_s27c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 SENSOR_VALIDATE=0 OUT="$OUT/all3" scripts/device.sh sensor
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=700 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 16" \
  OUT="$OUT/all" scripts/device.sh attribution
