#!/usr/bin/env bash
# Session 12's last call: where the transformer's +7.8 % under archline run's default (plan_s12c, GPU-477875cb)
# comes from. The same step with the sensors alone, with CUPTI detached for good after its first 0.3 s ("once"),
# and with the default (auto), each against no recording, 6 rotated repetitions.
#
#   OUT=/dir scripts/plan_s12d.sh          (scripts/device_bg.sh start WAIT plan_s12d runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
OVERHEAD_WORKLOADS=torch OVERHEAD_MODES=sensors,once,auto OVERHEAD_REPS=6 OVERHEAD_LIMIT=590 OUT="$OUT" \
  scripts/device.sh overhead
