#!/usr/bin/env bash
# Session 11's held-out call on a host of two H100s: on each GPU at the same time, burst_power.py (the board's burst
# power), then the attribution of both real training loops with the bound rule as committed (7312318: min(shipped
# burst ceiling, limit / largest window share) × 1.05), frozen before this run: two held-out boards.
set -u
OUT=${OUT:?set OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/install" "$OUT/gpu0" "$OUT/gpu1"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
for g in 0 1; do
  SKIP_INSTALL=1 ON_GPU=$g MAX_LARGE=2 ATTRIBUTION_LIMIT=1150 OVERHEAD_CPUS=$((8 + 8 * g))-$((15 + 8 * g)) \
    OUT="$OUT/gpu$g" scripts/device.sh burst attribution >"$OUT/gpu$g.log" 2>&1 &
done
wait
for part in gpu0 gpu1; do echo "=== $part"; tail -n 40 "$OUT/$part.log"; done
OUT="$OUT" scripts/gather_parts.sh gpu0 gpu1
