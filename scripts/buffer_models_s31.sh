#!/usr/bin/env bash
# Session 31: the power buffer's sensor model in every shipped calibration (profiles.json under results/): lag, delay
# and their sigma, in ms. Prints docs/data/buffer_models_s31.txt.
#   scripts/buffer_models_s31.sh
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
"$py" - <<'PY'
import json
from pathlib import Path
print("calibration                                                          lag ms  delay ms  lag σ ms  delay σ ms")
rows = []
for f in sorted(Path("results").rglob("profiles.json")):
    m = ((json.loads(f.read_text()).get("profiles") or {}).get("nvml.buffer") or {}).get("model")
    if not m:
        continue
    rows.append((m["lag_s"], m["delay_s"], m["lag_sigma_s"], m["delay_sigma_s"]))
    print(f"{str(f.parent):68s} {1e3 * m['lag_s']:6.2f} {1e3 * m['delay_s']:9.2f} {1e3 * m['lag_sigma_s']:9.2f} "
          f"{1e3 * m['delay_sigma_s']:11.2f}")
lo = [min(r[i] for r in rows) * 1e3 for i in range(4)]
hi = [max(r[i] for r in rows) * 1e3 for i in range(4)]
print(f"{len(rows)} calibrations: lag {lo[0]:.2f}-{hi[0]:.2f} ms, delay {lo[1]:.2f}-{hi[1]:.2f} ms, "
      f"lag σ {lo[2]:.2f}-{hi[2]:.2f} ms, delay σ {lo[3]:.2f}-{hi[3]:.2f} ms")
PY
