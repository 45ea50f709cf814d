# Sourced by the device plans (scripts/plan_*.sh from session 23 on): the start every plan on a host of several GPUs
# shares. Needs OUT; leaves the shell in the checkout's root with NVLink multicast off, the GPUs listed, archline
# installed once (its log in $OUT/install.log) and $OUT/all, all2, all3 made for the steps' archives.
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
mkdir -p "$OUT/install" "$OUT/all" "$OUT/all2" "$OUT/all3"
OUT="$OUT/install" scripts/device.sh >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
echo "installed: $(tail -3 "$OUT/install.log" | head -1)"
