"""Print the frozen ML model's figures of a roofline run: calibration choices, held-out errors, targets.

Usage: python benchmarks/validate_model_ml.py RUN_DIR [RUN_DIR ...] [--refit]

RUN_DIR is an ``archline roofline`` run directory (for example results/h100/roofline-ml).
Without ``--refit`` it reads what the run itself wrote (``roofline_ml_model.json`` and
``roofline_ml_predictions.csv``); with it, it re-runs the frozen protocol on the run's tables
first (the same code, for runs recorded before the analysis existed). Targets (issue 15): median
|energy error| ≤ 5 % at measured time and ≤ 12 % at predicted time over the held-out kernels,
none beyond 20 % without a named cause. Exit status 0 when all are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _pct(x: object) -> str:
    return f"{100 * float(x):+.1f} %" if isinstance(x, (int, float)) and math.isfinite(float(x)) else "—"


def report(d: Path, refit: bool) -> bool:
    from archline.model.ml_run import ML_MODEL_FILE, ML_PREDICTIONS_TABLE
    from archline.records import read_csv

    if refit:
        from archline.model.build import fit_run_dir

        fit_run_dir(d)
    if not (d / ML_MODEL_FILE).is_file():
        print(f"{d}: no {ML_MODEL_FILE} (not a roofline run with ML kernels; try --refit)", file=sys.stderr)
        return False
    obj = json.loads((d / ML_MODEL_FILE).read_text())
    gpu = json.loads((d / "manifest.json").read_text()).get("gpu", {}) if (d / "manifest.json").is_file() else {}
    m = obj["model"]
    print(f"== {d}: {gpu.get('name')} {str(gpu.get('uuid', '?'))[:12]}, driver {gpu.get('driver_version')}")
    print(f"π0 {m['pi0_w']:.1f} W; terms chosen on calibration: {'+'.join(m['terms']) or 'base'}; η {m['eta']}")
    for k, v in sorted(m["choices"]["term_scores_median_abs_error"].items(), key=lambda kv: kv[1]):
        print(f"  calibration median |error| with {k:28s} {100 * v:6.2f} %")
    eps = m["eps"]
    for k in ("tensor_bf16_flop", "tensor_fp16_flop", "tensor_fp8_flop", "tensor_fp64_flop", "l1_byte"):
        if eps.get(k) is not None:
            unit = "pJ/flop" if k.endswith("flop") else "pJ/B"
            print(f"  ε {k:18s} {1e12 * eps[k]:8.4f} {unit}")
    rows = read_csv(d / ML_PREDICTIONS_TABLE)
    print(f"{'kernel':40s} {'group':11s} {'bound':12s} {'E meas J':>10s} {'err@T':>8s} {'err@Tpred':>9s} {'T err':>8s}")
    for r in rows:
        print(
            f"{str(r['name'])[:40]:40s} {r['group']:11s} {r['bound']!s:12s} {r['measured_energy_j']:10.4g} "
            f"{_pct(r['error_measured_time']):>8s} {_pct(r['error_predicted_time']):>9s} {_pct(r['time_error']):>8s}"
        )
    ok = True
    for group in ("calibration", "heldout"):
        s = obj[group]
        print(
            f"{group}: {s['kernels']} kernels; median |error| at measured time "
            f"{100 * (s['median_abs_error_measured_time'] or math.nan):.1f} % (target ≤ 5 %), at predicted time "
            f"{100 * (s['median_abs_error_predicted_time'] or math.nan):.1f} % (target ≤ 12 %), at ncu's time "
            f"{100 * (s['median_abs_error_ncu_time'] or math.nan):.1f} %; "
            f"beyond 20 %: {', '.join(s['over_20pct']) or 'none'}"
        )
        if group == "heldout":
            met = s["met"]
            print("held-out targets: " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in met.items()))
            ok = all(met.values())
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--refit", action="store_true")
    a = ap.parse_args()
    results = [report(d, a.refit) for d in a.runs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
