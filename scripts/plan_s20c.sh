#!/usr/bin/env bash
# Prepared in session 20 for its last 7 minutes of device time (frozen in the commit that added it, after the rule it
# checks): replay priors timed like the program's calls (CUPTI busy time in the whole step, each prior's time part
# beyond the calls' common shift). On the one shipped run that recorded CUPTI busy times (session 18's busy design,
# H100 GPU-c7661d05) the energy-weighted time part falls from 6.8 % to 3.0 % (docs/attribution.md "Session 20",
# post hoc: it suggested the rule). Held out here, on a new board:
#  1. the transformer's attribution with a short design (100 s: a smoke run of the whole chain, not a score of
#     issue 13's ±15 %; the replay's rows must carry busy_time_s and the run's notes the calls' common shift);
#  2. the GPU tests (the replay row keeps its busy time).
# Judged afterwards on the CPU by benchmarks/time_parts.py: the energy-weighted time part of the replay priors, the
# session-19 rule (the design's wall-time share) against the session-20 rule, on this run.
#
#   OUT=/dir scripts/plan_s20c.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
MAX_LARGE=1 ATTRIBUTION_LIMIT=300 ATTRIBUTION_ARGS="--only transformer --design-budget-s 100" \
  OUT="$OUT" scripts/device.sh attribution
SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh gputest
