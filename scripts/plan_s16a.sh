#!/usr/bin/env bash
# Session 16, one board, three things (frozen in the commit that added this script):
#  1. nan_probe of ResNet-50 in channels_last (resnet50cl) beside the usual NCHW step, both primed with every buffer
#     kept: does NHWC (no cuDNN layout kernels) leave fewer groups and random halves computing on NaN?
#  2. the sensors' share of the default's cost by a dose: 16 sets of archline's sensors at once in every on-half
#     (overhead_interleaved.py --sensor-copies 16, 10 s halves, 150 s blocks, the transformer step and the decode
#     loop); the change is scaled back to one set by the NVML reads per second (cost proportional to reads assumed).
#  3. the attribution of resnet50cl, held out: every rule as committed at the end of session 15 (design budget 400 s).
#
#   OUT=/dir scripts/plan_s16a.sh          (scripts/device_bg.sh start WAIT plan_s16a runs it detached)
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
NANPROBE_ARGS="--only resnet50cl,resnet50 --prime --keep-buffers" \
  INTERLEAVED_COPIES=16 INTERLEAVED_SECONDS=150 INTERLEAVED_TOGGLE_S=10 \
  ATTRIBUTION_ARGS="--only resnet50cl" ATTRIBUTION_LIMIT=1000 MAX_LARGE=2 \
  OUT="$OUT" scripts/device.sh nanprobe interleaved attribution
