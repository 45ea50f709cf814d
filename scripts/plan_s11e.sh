#!/usr/bin/env bash
# Session 11's check of replay's fixed cost on a GPU: graph replay of the transformer step (isolated energies now
# net of a replay with no group enabled; their sum against the step), then the GPU tests.
#
#   OUT=/dir scripts/plan_s11e.sh          (scripts/device_bg.sh start WAIT plan_s11e runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
REPLAY_ONLY=transformer REPLAY_BUDGET_S=150 REPLAY_LIMIT=220 OUT="$OUT" scripts/device.sh replay gputest
