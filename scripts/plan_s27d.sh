#!/usr/bin/env bash
# Session 27: the installed wheel's archline run on a fresh H100, where the board has no calibration of its own, says
# in a note that the power buffer is fitted through the shipped prior and names archline sensor calibrate (added this
# session, tested on the CPU's fake GPU). A 4 s torch GEMM loop; the run directory comes back under all/.
#   OUT=/dir scripts/plan_s27d.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
site=/tmp/archline-site
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
cat >/tmp/gemm_loop.py <<'PY'
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t = time.time()
while time.time() - t < 4:
    b = a @ a
torch.cuda.synchronize()
PY
ls "$HOME/.cache/archline/sensors" 2>/dev/null || echo "no sensor calibration cached on this machine"
(cd /tmp && archline run -o "$OUT/all/gemm-run" -- python3 /tmp/gemm_loop.py) >"$OUT/all/run.log" 2>&1; echo "rc=$?"
grep -n "sensor calibrate\|buffer_model" "$OUT/all/run.log" "$OUT/all/gemm-run/manifest.json"
tail -n 25 "$OUT/all/run.log"
