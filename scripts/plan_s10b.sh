#!/usr/bin/env bash
# Session 10's second call, on the board of the first (archline already installed there): archline run's default
# tracing cost on the transformer training step and the GPT-2 decode loop, each alone on the machine (session 7
# measured them beside other jobs, whose noise was larger than the 3 % target).
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=torch OUT="$OUT" scripts/device.sh overhead
mkdir -p "$OUT/all"
SKIP_INSTALL=1 OVERHEAD_WORKLOADS=decode OUT="$OUT/all" scripts/device.sh overhead
