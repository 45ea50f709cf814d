#!/usr/bin/env bash
# Session 21 (frozen in the commit that added it, before it ran): the sensors' share of the default's cost on the
# worst-case loop, once more and longer. plan_s19b ran benchmarks/sensor_contention.py --copies 1 for 480 s (100
# cycles) on H100 GPU-cedf2c17: +1.72 % [-0.48, +4.05], UNRESOLVED. Here the same, no rule changed, for 840 s on
# whichever single GPU is lent; the verdict is the tool's own (PASS only where the whole interval lies within ±3 %).
# Longer than one call: run it detached (scripts/device_bg.sh start 580 plan_s21d, then wait).
#   OUT=/dir scripts/plan_s21d.sh
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
CONTENTION_SECONDS=840 CONTENTION_COPIES=1 CONTENTION_LIMIT=920 OUT="$OUT" scripts/device.sh contention
