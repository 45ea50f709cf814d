#!/usr/bin/env bash
# Session 27, frozen in the commit that added it, before it ran. One H100 (nvidia-h100-x1).
# Question: do the power buffer's windows contradict replay's priors because the buffer's sensor model is another
# board's? Every shipped attribution took the shipped Hopper prior (GPU-591bd772's calibration); on plan_s26a's board
# the buffer's windows refused the priors at 60 and 120 s, and post hoc (session 27) removing that board's
# reading-to-reading alternation (a notch at 23-24.9 Hz, or AR whitening) made the refusal firmer, not weaker.
#   1. archline sensor calibrate of this board (the full schedule; its profile goes to the user's cache).
#   2. The transformer at batch 128 as plan_s26a (links design, 250 s, replay priors, no rule changed), traced for
#      30 s; archline run takes the board's own calibration from the cache (its manifest says which model it took).
# Scored, decided before the run: the share within ±15 % at the full 30 s as run (the board's own sensor model), and
# on the same trace, redone on the CPU (benchmarks/redo_attribution.py --sensor-profiles), with the shipped prior
# instead. The hypothesis holds if the own model's buffer windows do not refuse the priors where the shipped prior's
# do, or its share within ±15 % is higher by more than 5 points; otherwise it is refuted for this board.
# About 12 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s27a, then wait). Locally:
# scripts/slim_tree.sh out first, back after. Archives: all3-* (sensor), all-* (attribution).
#   OUT=/dir scripts/plan_s27a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 SENSOR_VALIDATE=0 OUT="$OUT/all3" scripts/device.sh sensor
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=700 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128 --seconds 30" \
  OUT="$OUT/all" scripts/device.sh attribution
