#!/usr/bin/env bash
# Session 27's second plan, frozen in the commit that added it, before it ran. One H100 (nvidia-h100-x1).
# plan_s27a (H100 GPU-f926ffcb, 30 s traced) found, on one trace redone with either sensor model: with the board's own
# calibration the buffer's windows agreed with replay's priors (ρ̂ 0.5 %, the grid's bottom), with the shipped prior
# of GPU-591bd772 they asked for ρ̂ 33.2 % (neither refused them; 0.0 % within ±15 % with either, the design's fold
# √2 × 6.2 % forbidding it). That comparison was not the plan's score (post hoc). On plan_s26a's board the shipped
# prior's windows refused the priors once the recording was 60 s or longer. This plan tests both, on another board:
#   1. archline sensor calibrate of this board (full schedule; the profile goes to the user's cache);
#   2. the transformer at batch 128 as plan_s26a (links design, 250 s, replay priors, no rule changed), traced 90 s;
#      archline run takes the board's own calibration.
# Scored, decided before the run, on this trace redone on the CPU with either model (benchmarks/redo_attribution.py
# --sensor-profiles: this board's profiles.json, and results/h100/sensor/calibration/profiles.json), at 90 s and cut
# to its first 30 s of training (--cut-s 60):
#   H1: at 90 s the own model's windows do not refuse the priors; if the shipped prior's do, the difference is the
#       model's (else the test is silent on it).
#   H2: the own model's ρ̂ is lower than the shipped prior's at both lengths.
#   The share within ±15 % and the top ten are reported for both; a longer trace is not expected to pass ±15 % here.
# About 12 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s27b, then wait). Locally:
# scripts/slim_tree.sh out first, back after. Archives: all3-* (sensor), all-* (attribution).
#   OUT=/dir scripts/plan_s27b.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 SENSOR_VALIDATE=0 OUT="$OUT/all3" scripts/device.sh sensor
SKIP_INSTALL=1 MAX_LARGE=1 ATTRIBUTION_LIMIT=900 \
  ATTRIBUTION_ARGS="--only transformer --design-model links --design-budget-s 250 --transformer-batch 128 --seconds 90" \
  OUT="$OUT/all" scripts/device.sh attribution
