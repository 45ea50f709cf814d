"""Issue 11's simulated-zoo targets: every published sensor generation, every workload, ``--sensor auto``.

For each sensor of ``archline.hw.simulated.SENSOR_ZOO`` and each workload of ``tests/helpers/zoo.py``
(at a low, K20-like and a high, Hopper-like power scale) the model is inferred from the recording
alone and every window's energy compared with the truth. Prints one row per sensor: the targets
(full coverage: windows ≥ 0.5 s within 2 % and resolvable; part-time: ≥ 2 s within 2 %; the
training loop and its 10 s pieces within 1 %, its 1 s pieces within 2 %), the worst error of each
class, the honesty of σ (share of windows with |error| ≤ 2σ, the largest |error|/σ) and its
sharpness (the largest relative σ of a window of 2 s or more).

Usage: python benchmarks/validate_sensor_zoo.py [--quick] [--sensor NAME ...]   (CPU only; ~1–3 min)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.zoo import WindowCheck, check_sensor, full_zoo, k20_like, reduced_zoo

from archline.hw.sensor_zoo import SENSOR_ZOO

SCALES = {"low": (25.0, 150.0), "high": (110.0, 700.0)}


def _worst(rows: list[WindowCheck], labels: tuple[str, ...]) -> str:
    sel = [r for r in rows if r.label in labels and r.limit is not None]
    if not sel:
        return "-"
    w = max(sel, key=lambda r: abs(r.rel_error))
    fails = sum(not r.passed for r in sel)
    return f"{100 * w.rel_error:+.2f} %" + (f" ({fails} fail)" if fails else "")


def summarize(name: str, rows: list[WindowCheck]) -> dict[str, object]:
    z = np.array([abs(r.z) for r in rows])
    within2 = float(np.mean(z <= 2.0)) if z.size else float("nan")
    zmax = float(np.max(z)) if z.size else float("nan")
    targets = [r for r in rows if r.limit is not None]
    ok = all(r.passed for r in targets) and within2 >= 0.9 and zmax <= 3.0
    long = [r.rel_sigma for r in rows if r.duration_s >= 2.0 and r.label in ("kernel", "loop", "loop10")]
    return {
        "sensor": name,
        "windows": len(rows),
        "kernels": _worst(rows, ("kernel",)),
        "loop+10s": _worst(rows, ("loop", "loop10")),
        "loop 1s": _worst(rows, ("loop1",)),
        "|err|<=2sigma": f"{100 * within2:.0f} %",
        "max |z|": f"{zmax:.1f}",
        "max σ ≥ 2 s": f"{100 * max(long):.2f} %" if long else "-",
        "pass": "yes" if ok else "NO",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the reduced zoo of the unit tests")
    ap.add_argument("--sensor", action="append", choices=sorted(SENSOR_ZOO), help="only these sensors")
    ap.add_argument("--details", action="store_true", help="print every failing window")
    args = ap.parse_args(argv)
    names = args.sensor or list(SENSOR_ZOO)
    table = []
    for name in names:
        zs = SENSOR_ZOO[name]
        rows: list[WindowCheck] = []
        for idle, busy in SCALES.values():
            wls = reduced_zoo(idle, busy) if args.quick else full_zoo(idle, busy)
            rows += check_sensor(zs, wls)
        if name == "kepler":
            rows += check_sensor(zs, [k20_like(1.0), k20_like(4.0)])
        table.append(summarize(name, rows))
        if args.details:
            for r in rows:
                if not r.passed or abs(r.z) > 2:
                    print(
                        f"  {name} {r.workload} {r.window}: {r.duration_s:.3f} s err {100 * r.rel_error:+.2f} % "
                        f"sigma {100 * r.rel_sigma:.2f} % z {r.z:+.1f} resolvable {r.resolvable}"
                    )
        print(" | ".join(f"{k} {v}" for k, v in table[-1].items()), flush=True)
    cols = list(table[0])
    print("\n| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for t in table:
        print("| " + " | ".join(str(t[c]) for c in cols) + " |")
    return 0 if all(t["pass"] == "yes" for t in table) else 1


if __name__ == "__main__":
    raise SystemExit(main())
