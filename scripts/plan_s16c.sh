#!/usr/bin/env bash
# Session 16: the sensors' share of the default's cost on the launch-bound decode loop, by a dose (frozen before its
# run). plan_s16a's 16 full sets of sensors took 14-18 s to leave each on-half (each attributed its recording), so
# only 4 cycles counted; here every on-half holds archline's sensors as archline run records them plus 15 bare
# samplers (the same NVML sources, each polled at its own interval, nothing recorded: overhead_interleaved.py
# --sensor-copies 16). The change is scaled back to one sampler by the NVML reads per second. The tracing figure
# of this run is not the default's: plan_s16a showed CUPTI's switches waiting behind queued NVML reads (2 s with 16
# samplers against 12 ms without), so only the off-halves' traced periods are the default's tracing.
#
#   OUT=/dir scripts/plan_s16c.sh          (scripts/device_bg.sh start WAIT plan_s16c runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
INTERLEAVED_WORKLOADS=decode INTERLEAVED_COPIES=16 INTERLEAVED_SECONDS=160 INTERLEAVED_TOGGLE_S=10 \
  OUT="$OUT" scripts/device.sh interleaved
